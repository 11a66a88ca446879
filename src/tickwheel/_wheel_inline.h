/* _wheel_inline.h: small C helpers of the compiled core (_wheel.pyx and
   its _wheel_*.pxi units) that Cython cannot spell: one-digit ints read
   without a call, callable checks, borrowed list items, a type's tp_new
   called directly, and cache prefetches.  No CPython version switches
   beyond the one for compact ints; those live in _compat.h. */
#ifndef TICKWHEEL_WHEEL_INLINE_H
#define TICKWHEEL_WHEEL_INLINE_H

/* PyCallable_Check's body, inline (the same test on 3.9-3.15). */
#define TW_CALLABLE(o) (Py_TYPE(o)->tp_call != NULL)

/* A borrowed list item through a borrowed list pointer (no refcounting). */
#define TW_LIST_ITEM(l, i) PyList_GET_ITEM((l), (i))
/* A list's item array (valid until the list is resized). */
#define TW_LIST_ITEMS(l) (((PyListObject *)(l))->ob_item)

/* Does this TimerTask subtype keep TimerTask's tp_new (any Python
   subclass without __new__)?  Then it is made as TimerTask is, and
   _add's checks for a re-added task are skipped; see
   _schedule_as (_wheel_place.pxi). */
static int tw_keeps_task_new(PyObject *t, PyObject *base) {
    return ((PyTypeObject *)t)->tp_new == ((PyTypeObject *)base)->tp_new;
}
/* A new instance through the type's tp_new, without the generic call
   adapter of type.__call__ / cls.__new__ (~400 instructions). */
static PyObject *tw_new_instance(PyObject *t) {
    PyObject *args = PyTuple_New(0), *o;
    if (args == NULL) { return NULL; }
    o = ((PyTypeObject *)t)->tp_new((PyTypeObject *)t, args, NULL);
    Py_DECREF(args);
    return o;
}

/* An int of one digit (|v| < 2**30; 3.12+ public unstable API): its
   value without a call.  Every such value is a valid delay in ms. */
#if PY_VERSION_HEX >= 0x030C0000
#define TW_SMALL_INT(o, out) \
    (PyUnstable_Long_IsCompact((PyLongObject *)(o)) \
     ? (*(out) = (long long)PyUnstable_Long_CompactValue((PyLongObject *)(o)), 1) \
     : 0)
#else
#define TW_SMALL_INT(o, out) 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TW_PREFETCH(p) __builtin_prefetch((const void *)(p), 1, 3)
#define TW_PREFETCH_PAGE(p) \
    __builtin_prefetch((const void *)((uintptr_t)(p) & ~(uintptr_t)4095), 1, 3)
#else
#define TW_PREFETCH(p) ((void)0)
#define TW_PREFETCH_PAGE(p) ((void)0)
#endif

#endif /* TICKWHEEL_WHEEL_INLINE_H */
