p = "src/tickwheel/_wheel.pyx"
s = open(p).read()
old = "    static CYTHON_INLINE int tw_small_int(PyObject *o, long long *out) {\n"
assert old in s
s = s.replace(old, old + "        if (1) return 0;\n")
open(p, "w").write(s)
