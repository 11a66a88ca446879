"""Build the optional Cython extension; all metadata lives in pyproject.toml.

Environment switches (read here and, for the first, at import time):

* ``TICKWHEEL_NO_EXTENSIONS=1``: pure-Python build, no compiler needed.
* ``TICKWHEEL_DEBUG_BUILD=1``: ``-O0 -g``, line tracing and annotated HTML.

A compiler error is never swallowed: opting out is explicit.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


NO_EXTENSIONS = _flag("TICKWHEEL_NO_EXTENSIONS") or sys.implementation.name != "cpython"
DEBUG_BUILD = _flag("TICKWHEEL_DEBUG_BUILD")


class BuildExt(build_ext):
    """Cythonize when compiling, never when making the sdist.

    The sdist therefore ships ``_wheel.pyx``, the ``_wheel_*.pxi`` units it
    includes, ``_wheel.pxd`` and the ``.h`` files, and no generated ``.c``;
    rebuilding from it needs Cython (a build requirement).  The C
    file goes to ``build_temp`` so a build leaves no ``_wheel.c`` in ``src/``;
    a debug build keeps it (and the annotated HTML) next to the ``.pyx``,
    where Cython's coverage plugin looks for it.
    """

    def build_extensions(self) -> None:
        from Cython.Build import cythonize

        # auto_pickle off: the nodes hold C pointers and cannot be pickled
        # anyway, and help() would list Cython's __reduce_cython__ and
        # __setstate_cython__ on every class.
        directives = {
            "language_level": 3,
            "binding": True,
            "embedsignature": False,
            "auto_pickle": False,
        }
        if DEBUG_BUILD:
            directives["linetrace"] = True
        for ext in self.extensions:
            # Swap the .pyx for its generated .c in place, as Cython's own
            # build_ext does: setuptools has already set up these objects.
            (cythonized,) = cythonize(
                [ext],
                compiler_directives=directives,
                annotate=DEBUG_BUILD,
                build_dir=None if DEBUG_BUILD else self.build_temp,
            )
            ext.sources = cythonized.sources
        super().build_extensions()


if NO_EXTENSIONS:
    print("*********************\n* Pure Python build *\n*********************")
    ext_modules = []
else:
    print("**********************\n* Accelerated build *\n**********************")
    macros = []
    extra_compile_args = ["-O2"] if os.name != "nt" else []
    if DEBUG_BUILD:
        macros = [("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
        extra_compile_args = ["-O0", "-g"] if os.name != "nt" else []
    ext_modules = [
        Extension(
            "tickwheel._wheel",
            ["src/tickwheel/_wheel.pyx"],
            # Includes the _wheel_*.pxi units (one C file); _compat.h,
            # _ftlock.h, _wheel_struct.h and _wheel_inline.h sit beside it.
            include_dirs=["src/tickwheel"],
            define_macros=macros,
            extra_compile_args=extra_compile_args,
        ),
        # cimports _wheel.pxd (DelayedOperation extends TimerTask's C struct),
        # so the two are always built together.
        Extension(
            "tickwheel._purgatory",
            ["src/tickwheel/_purgatory.pyx"],
            include_dirs=["src/tickwheel"],
            define_macros=macros,
            extra_compile_args=extra_compile_args,
        ),
        # DelayedProduce's hot half; cimports _purgatory.pxd (_ProduceCore
        # extends DelayedOperation's C struct).
        Extension(
            "tickwheel._kafka",
            ["src/tickwheel/_kafka.pyx"],
            include_dirs=["src/tickwheel"],  # _ftlock.h, via _wheel.pxd
            define_macros=macros,
            extra_compile_args=extra_compile_args,
        ),
        # The replay engine's loop; cimports _kafka.pxd (_ProduceCore).
        Extension(
            "tickwheel.spark._replay",
            ["src/tickwheel/spark/_replay.pyx"],
            include_dirs=["src/tickwheel"],  # _ftlock.h, via _wheel.pxd
            define_macros=macros,
            extra_compile_args=extra_compile_args,
        ),
    ]

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt})
