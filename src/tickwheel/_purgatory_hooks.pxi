# _purgatory_hooks.pxi: included by _purgatory.pyx (one extension module).
# Calling an operation's hooks (try_complete, on_complete, on_expiration):
# the per-class decision between the compiled body and a method call.
# Calls: _compat.h (type version tags).

# -- calling the hooks ----------------------------------------------------------
# try_complete, on_complete and on_expiration are cpdef.  Cython's dispatch
# for an object whose class may override them in Python (a heap type, or
# one with a __dict__) looks the name up as an attribute, which builds a
# bound method, and calls that: about 700 instructions a call on 3.11, and
# as much for a Python class that overrides nothing (DelayedProduce).  So
# the purgatory decides once per class, on the GIL builds:
#
# * a hook that no Python class in the MRO defines, on a class with no
#   instance __dict__ and the generic __getattribute__, runs its compiled
#   body directly (the C virtual methods _try_c, _complete_c, _expire_c,
#   which the cpdef hooks delegate to), skipping Cython's check;
# * a hook a Python class defines as a plain function, on such a class, is
#   that function called with ``self`` first: what the method lookup finds
#   (no instance dict or descriptor can intervene), without the lookup
#   (about 200 instructions a call on 3.11);
# * any other hook is called with PyObject_VectorcallMethod (public since
#   3.9): the same function the attribute would be (instance dict,
#   descriptors, __getattribute__ included), ``self`` prepended, no bound
#   method.
#
# The decision (a bit per hook, and the functions) is cached per class
# with the class's version tag, which CPython changes whenever the class or
# a base is modified (a hook assigned later is seen).  Free-threaded builds
# take the second way for every Python class: no shared cache to race on.
cdef extern from "_compat.h":
    pass

cdef extern from *:
    """
    static inline int tw_maybe_overridden(PyObject *o) {
        PyTypeObject *t = Py_TYPE(o);
        return t->tp_dictoffset != 0 || PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE);
    }
    static inline int tw_generic_getattr(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return t->tp_getattro == PyObject_GenericGetAttr && t->tp_dictoffset == 0;
    }
    static inline unsigned int tw_version_tag(PyObject *cls) {
        return tw_type_version((PyTypeObject *)cls);  /* _compat.h */
    }
    /* The last class decided (GIL builds): a borrowed pointer, valid while
       the tag matches (tags are never reused, so a new class at the same
       address has another). */
    static PyTypeObject *tw_hk_type = NULL;
    static unsigned int tw_hk_tag = 0;
    static int tw_hk_mask = 0;
    /* Its hooks that are plain Python functions, by bit index (borrowed from
       the class's cache entry; NULL: call through the method lookup). */
    static PyObject *tw_hk_fn[4] = {NULL, NULL, NULL, NULL};
    static inline int tw_hk_last(PyObject *o) {
        PyTypeObject *t = Py_TYPE(o);
        if (t == tw_hk_type && tw_hk_tag != 0 && tw_type_version(t) == tw_hk_tag)
            return tw_hk_mask;
        return -1;
    }
    static inline void tw_hk_remember(PyObject *o, unsigned int tag, int mask,
                                      PyObject *fns) {
        /* fns: a tuple of 4 (function or None), kept alive by the cache. */
        tw_hk_type = Py_TYPE(o);
        tw_hk_tag = tag;
        tw_hk_mask = mask;
        for (int i = 0; i < 4; i++) {
            PyObject *fn = PyTuple_GET_ITEM(fns, i);
            tw_hk_fn[i] = fn == Py_None ? NULL : fn;
        }
    }
    /* Call hook number i of self: the class's function with self first,
       which is what the method lookup would find (no instance __dict__, the
       generic __getattribute__, a plain function: no descriptor to apply),
       without the lookup; else through the lookup. */
    static inline PyObject *tw_hk_call(int i, PyObject *name, PyObject *self) {
        PyTypeObject *t = Py_TYPE(self);
        PyObject *fn = tw_hk_fn[i];
        if (fn != NULL && t == tw_hk_type && tw_type_version(t) == tw_hk_tag)
            return PyObject_Vectorcall(fn, &self, 1, NULL);
        return PyObject_VectorcallMethod(name, &self, 1, NULL);
    }
    """
    bint tw_maybe_overridden(object o) noexcept
    bint tw_generic_getattr(object cls) noexcept
    unsigned int tw_version_tag(object cls) noexcept
    int tw_hk_last(object o) noexcept
    void tw_hk_remember(object o, unsigned int tag, int mask, tuple fns) noexcept
    object tw_hk_call(int i, object name, object self)

from types import FunctionType as _FunctionType

cdef object _S_TRY_COMPLETE = sys.intern("try_complete")
cdef object _S_ON_COMPLETE = sys.intern("on_complete")
cdef object _S_ON_EXPIRATION = sys.intern("on_expiration")
cdef object _S_FORCE_COMPLETE = sys.intern("force_complete")

# Bits of a class's hook mask: the hook is called through the attribute.
cdef enum:
    _HK_TRY = 1
    _HK_COMPLETE = 2
    _HK_EXPIRE = 4
    _HK_FORCE = 8
    _HK_ALL = 15

# class -> (version tag, mask, functions), behind the one-entry cache in C.
cdef dict _hook_masks = {}
cdef tuple _NO_FUNCTIONS = (None, None, None, None)
cdef object _ABSENT = object()
cdef tuple _HOOKS = (
    (_HK_TRY, _S_TRY_COMPLETE), (_HK_COMPLETE, _S_ON_COMPLETE),
    (_HK_EXPIRE, _S_ON_EXPIRATION), (_HK_FORCE, _S_FORCE_COMPLETE),
)


def _hook_cached(cls):
    """The hook mask cached for ``cls`` (bits: try_complete 1, on_complete 2,
    on_expiration 4, force_complete 8 go through the attribute), or None.

    For tests: a Python class used with the purgatory is cached on GIL builds.
    """
    entry = _hook_masks.get(cls)
    if entry is None or (<tuple>entry)[0] != tw_version_tag(cls):
        return None
    return (<tuple>entry)[1]


def _hook_functions(cls):
    """The hooks of ``cls`` called directly, as a tuple (try_complete,
    on_complete, on_expiration, force_complete; None: through the method
    lookup, or compiled), or None if ``cls`` is not cached.  For tests."""
    entry = _hook_masks.get(cls)
    if entry is None or (<tuple>entry)[0] != tw_version_tag(cls):
        return None
    return (<tuple>entry)[2]


cdef int _hook_mask(object op) except -1:
    # Which hooks of type(op) go through the attribute (see above).
    cdef int mask
    cdef unsigned int tag
    if not tw_maybe_overridden(op):
        return 0
    if TW_FT_LOCKS:
        return _HK_ALL
    mask = tw_hk_last(op)
    if mask >= 0:
        return mask
    cls = type(op)
    tag = tw_version_tag(cls)
    entry = _hook_masks.get(cls)
    if entry is not None and tag != 0 and (<tuple>entry)[0] == tag:
        mask = (<tuple>entry)[1]
        tw_hk_remember(op, tag, mask, (<tuple>entry)[2])
        return mask
    mask = _HK_ALL
    functions = _NO_FUNCTIONS
    if tw_generic_getattr(cls):
        mask, functions = _hooks_of(cls)
    getattr(cls, _S_TRY_COMPLETE)  # a lookup through the type cache assigns a tag
    tag = tw_version_tag(cls)
    if tag != 0:
        if len(_hook_masks) >= 256:
            _hook_masks.clear()  # classes made on the fly: keep it bounded
        _hook_masks[cls] = (tag, mask, functions)
        tw_hk_remember(op, tag, mask, functions)
    return mask


cdef tuple _hooks_of(type cls):
    # (mask, functions) of a class with the generic __getattribute__ and no
    # instance __dict__: a hook some Python class in the MRO defines goes
    # through the attribute, and when that definition is a plain function
    # it is called directly (what the method lookup would find and call).
    cdef int mask = 0
    functions = []
    for bit, name in _HOOKS:
        function = None
        for base in cls.__mro__:
            found = (<type>base).__dict__.get(name, _ABSENT)
            if found is not _ABSENT:
                if (<type>base).__flags__ & Py_TPFLAGS_HEAPTYPE:
                    mask |= bit
                    if type(found) is _FunctionType:
                        function = found
                break
        functions.append(function)
    return mask, tuple(functions)
