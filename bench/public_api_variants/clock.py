p = "src/tickwheel/_wheel.pyx"
s = open(p).read()
old = """        if self._fast_clock:
            return tw_monotonic_ns()
"""
assert old in s
s = s.replace(old, "")
open(p, "w").write(s)
