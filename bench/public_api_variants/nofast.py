p = "src/tickwheel/_wheel.pyx"
s = open(p).read()
old = "\n_install_fast_schedule()\n"
assert old in s
s = s.replace(old, "\n")
open(p, "w").write(s)
