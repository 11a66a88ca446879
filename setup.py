"""Build the optional Cython extension; all metadata lives in pyproject.toml.

Environment switches (read here and, for the first, at import time):

* ``TICKWHEEL_NO_EXTENSIONS=1``: pure-Python build, no compiler needed.
* ``TICKWHEEL_DEBUG_BUILD=1``: ``-O0 -g``, line tracing and annotated HTML.

A compiler error is never swallowed: opting out is explicit.
"""

import os
import sys

from setuptools import Extension, setup


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


NO_EXTENSIONS = _flag("TICKWHEEL_NO_EXTENSIONS") or sys.implementation.name != "cpython"
DEBUG_BUILD = _flag("TICKWHEEL_DEBUG_BUILD")

if NO_EXTENSIONS:
    print("*********************\n* Pure Python build *\n*********************")
    ext_modules = []
else:
    print("**********************\n* Accelerated build *\n**********************")
    from Cython.Build import cythonize

    directives = {"language_level": 3, "binding": True, "embedsignature": False}
    macros = []
    extra_compile_args = ["-O2"] if os.name != "nt" else []
    if DEBUG_BUILD:
        directives["linetrace"] = True
        macros = [("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
        extra_compile_args = ["-O0", "-g"] if os.name != "nt" else []
    ext_modules = cythonize(
        [
            Extension(
                "tickwheel._wheel",
                ["src/tickwheel/_wheel.pyx"],
                define_macros=macros,
                extra_compile_args=extra_compile_args,
            )
        ],
        compiler_directives=directives,
        annotate=DEBUG_BUILD,
    )

setup(ext_modules=ext_modules)
