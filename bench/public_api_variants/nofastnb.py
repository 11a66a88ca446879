p = "src/tickwheel/_wheel.pyx"
s = open(p).read()
old = "\n_install_fast_schedule()\n"
assert old in s
s = s.replace(old, "\n")
for name in ("    def schedule(self, delay_ms", "    def schedule_as(self, task_type"):
    assert name in s
    s = s.replace(name, "    @cython.binding(False)\n" + name)
open(p, "w").write(s)
