"""The single source of the version.

``pyproject.toml`` reads it statically (``[tool.setuptools.dynamic]``, an AST
lookup of this literal, so building never imports the package or needs the
compiled core) and ``tickwheel.__version__`` re-exports it.  Bump it here,
with a CHANGELOG.md entry, and tag the release ``v<version>``.
"""

__version__ = "0.1.0"
