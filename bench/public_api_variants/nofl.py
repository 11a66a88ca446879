p = "src/tickwheel/_wheel.pyx"
s = open(p).read()
old = "        t->tp_free = tw_task_free;\n"
assert old in s
s = s.replace(old, "")
open(p, "w").write(s)
