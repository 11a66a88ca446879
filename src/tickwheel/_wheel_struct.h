/* _wheel_struct.h: C that reaches into the structs Cython generates for
   _wheel.pxd's TimerTaskEntry, TimerTask and TimerTaskList (the compiled
   core, _wheel.pyx and its _wheel_*.pxi units, is the only includer).

   Cython names a cdef class's struct __pyx_obj_ + module + class, as it
   has since 0.x; a new scheme fails the build here rather than
   miscompiling it.  The macros are expanded after Cython's struct
   definitions, so they may name the fields. */
#ifndef TICKWHEEL_WHEEL_STRUCT_H
#define TICKWHEEL_WHEEL_STRUCT_H

/* An exact TimerTask made in place by schedule() on a GIL build: every
   field written once (no zeroing, no None written and replaced); the
   struct is Cython's (TW_ENTRY_LIST_SLOT's naming). */
#define TW_TASK_FILL(o, fn, args, expiration, delay_ms, early, state) do { \
    struct __pyx_obj_9tickwheel_6_wheel_TimerTask *t_ = \
        (struct __pyx_obj_9tickwheel_6_wheel_TimerTask *)(o); \
    t_->__pyx_base._expiration_ms = (expiration); \
    t_->__pyx_base._prev = NULL; \
    t_->__pyx_base._next = NULL; \
    Py_INCREF(Py_None); \
    t_->__pyx_base._list = (void *)Py_None; \
    Py_INCREF(fn); \
    t_->_fn = (fn); \
    Py_INCREF(args); \
    t_->_args = (args); \
    t_->_delay_ms = (double)(delay_ms); \
    t_->_state = (state); \
    t_->_spent = 0; \
    t_->_delay_is_int = 1; \
    t_->_claim = 0; \
    t_->_early_ns = (early); \
} while (0)
/* TW_TASK_FILL writes every field of TimerTaskEntry and TimerTask, in
   the order _wheel.pxd declares them.  This check stops the build (a
   negative array size) unless those fields, listed here in the same
   order, follow the object header back to back and end the struct: a
   field added to either class and not to this list (and to TW_TASK_FILL)
   breaks the chain.  tests/test_task_fill.py keeps the list, the macro
   and _wheel.pxd's fields the same. */
#define TW_ENTRY_T struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry
#define TW_TASK_T struct __pyx_obj_9tickwheel_6_wheel_TimerTask
#define TW_END_OF(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))
#define TW_NEXT_TO(T, a, b) (TW_END_OF(T, a) == offsetof(T, b))
#define TW_TASK_FILL_CHECK() ((void)sizeof(char[( \
    offsetof(TW_ENTRY_T, _expiration_ms) == sizeof(PyObject) \
    && TW_NEXT_TO(TW_ENTRY_T, _expiration_ms, _prev) \
    && TW_NEXT_TO(TW_ENTRY_T, _prev, _next) \
    && TW_NEXT_TO(TW_ENTRY_T, _next, _list) \
    && TW_END_OF(TW_ENTRY_T, _list) == sizeof(TW_ENTRY_T) \
    && offsetof(TW_TASK_T, _fn) == sizeof(TW_ENTRY_T) \
    && TW_NEXT_TO(TW_TASK_T, _fn, _args) \
    && TW_NEXT_TO(TW_TASK_T, _args, _delay_ms) \
    && TW_NEXT_TO(TW_TASK_T, _delay_ms, _state) \
    && TW_NEXT_TO(TW_TASK_T, _state, _spent) \
    && TW_NEXT_TO(TW_TASK_T, _spent, _delay_is_int) \
    && TW_NEXT_TO(TW_TASK_T, _delay_is_int, _claim) \
    && TW_NEXT_TO(TW_TASK_T, _claim, _early_ns) \
    && TW_END_OF(TW_TASK_T, _early_ns) == sizeof(TW_TASK_T)) ? 1 : -1]))
/* The bodies of TimerTask's and TimerTaskEntry's tp_dealloc in one
   (Cython's, without their finalizer test). */
#define TW_TASK_CLEAR(o) do { \
    struct __pyx_obj_9tickwheel_6_wheel_TimerTask *t_ = \
        (struct __pyx_obj_9tickwheel_6_wheel_TimerTask *)(o); \
    Py_CLEAR(t_->_fn); \
    Py_CLEAR(t_->_args); \
    Py_CLEAR(t_->__pyx_base._list); \
} while (0)

/* The address of a TimerTaskEntry's _list slot, for tw_load_ptr and
   tw_store_ptr (Cython refuses the address of an object attribute).
   The struct is Cython's, under the name it has generated for a cdef
   class since 0.x (__pyx_obj_ + module + class): a new scheme would
   fail this build, not miscompile it. */
#define TW_ENTRY_LIST_SLOT(e) \
    ((void **)&((struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry *)(e))->_list)

/* A bucket is its ring's sentinel (_wheel.pxd): its _tail and _head
   must sit where an entry keeps _prev and _next.  A build whose layout
   differs stops here (a negative array size), before it could run. */
#define TW_BUCKET_RING_CHECK() ((void)sizeof(char[ \
    (offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskList, _tail) \
     == offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry, _prev) \
     && offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskList, _head) \
     == offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry, _next)) \
    ? 1 : -1]))

/* Move a task's callable out of it: *out gets the task's own reference
   and the field holds None (a macro: the struct is defined after this
   block; TW_ENTRY_LIST_SLOT's naming). */
#define TW_TASK_TAKE_FN(t, out) do { \
    struct __pyx_obj_9tickwheel_6_wheel_TimerTask *t_ = \
        (struct __pyx_obj_9tickwheel_6_wheel_TimerTask *)(t); \
    *(out) = t_->_fn; \
    Py_INCREF(Py_None); \
    t_->_fn = Py_None; \
} while (0)

#endif /* TICKWHEEL_WHEEL_STRUCT_H */
