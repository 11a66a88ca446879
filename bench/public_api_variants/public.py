p = "src/tickwheel/_wheel.pyx"
s = open(p).read()
old = "        t->tp_free = tw_task_free;\n"
assert old in s
s = s.replace(old, "")
a = s.index("cdef inline TimerTask _new_task(object fn, tuple args):")
b = s.index("cdef inline void _release(TimerTask task)")
s = (
    s[:a]
    + '''cdef inline TimerTask _new_task(object fn, tuple args):
    """A new TimerTask holding ``fn(*args)``."""
    cdef TimerTask task = TimerTask.__new__(TimerTask)
    task._fn = fn
    task._args = args
    return task


'''
    + s[b:]
)
open(p, "w").write(s)
