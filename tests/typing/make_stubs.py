"""Write tickwheel's public type stubs from the pure-Python sources.

Type checkers name a class after the module whose ``class`` statement they
read.  The classes users get from :mod:`tickwheel` are defined in private
modules (the compiled ``_wheel``/``_purgatory``/``_kafka`` or their
pure-Python twins, and ``_asyncio_handles``/``_asyncio_wheel``/
``_asyncio_loop`` behind :mod:`tickwheel.compat_asyncio`), so mypy showed
``tickwheel._wheel_py.TimerTask`` where the API says ``tickwheel.TimerTask``.
This script writes the stubs that define those classes in their public
modules, for type checkers only:

* ``src/tickwheel/__init__.pyi``: every class and function ``_impl`` takes from
  the twins (``TimerTask``, ``DelayedOperation``, ... and the private bases the
  public modules build on, ``TimerCore`` as ``_TimerCore``), plus the
  package's re-exports and ``__all__`` as ``__init__.py`` has them.
  ``_impl`` hands these classes to the other modules when type checking, so
  ``MockTimer.schedule`` returns ``tickwheel.TimerTask``.
* ``src/tickwheel/compat_asyncio.pyi``: the public names of
  ``compat_asyncio`` (``Timeout``, ``TimerHandle``, ``TimerWheel``,
  ``EventLoopPolicy``, the functions) with their public members.

Each signature is copied from the source (defaults become ``...``; docstrings
and bodies are left out), so the sources stay the only place to edit:
``tests/test_typing.py`` fails when a stub differs from what this script
writes, and runs mypy's stubtest on both cores.  After changing a signature::

    python tests/typing/make_stubs.py          # rewrite the stubs
    python tests/typing/make_stubs.py --check  # exit 1 if they are stale
"""

from __future__ import annotations

import ast
import builtins
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tickwheel"

HEADER = '''\
"""Type stub written by tests/typing/make_stubs.py: do not edit.

{sources}
(change them there, then run the script).  The classes are defined here,
in a public module, so that type checkers name them after it:
{example}.
"""

'''

#: Twin classes renamed in the stub: ``TimerCore`` is not a public name of
#: the package (``from tickwheel import TimerCore`` must not type-check).
RENAME = {"TimerCore": "_TimerCore"}

#: Names a stub may use that no source imports at the top level.
EXTRA_IMPORTS = {
    "Self": "from typing_extensions import Self",
    "final": "from typing import final",
    "type_check_only": "from typing import type_check_only",
}


def _source(path: Path) -> tuple[ast.Module, list[str]]:
    text = path.read_text(encoding="utf-8")
    return ast.parse(text, str(path)), text.splitlines()


def _imports(tree: ast.Module) -> dict[str, str]:
    """name -> the import statement that binds it, at the top or under an if."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                found.setdefault(name, ast.unparse(ast.Import([alias])))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                stmt = ast.ImportFrom(node.module, [alias], node.level)
                found.setdefault(alias.asname or alias.name, ast.unparse(stmt))
    return found


def _ignore_comment(lines: list[str], first: int, last: int) -> str:
    """A ``# type: ignore[...]`` on the source lines first..last (1-based)."""
    for line in lines[first - 1 : last]:
        _, sep, comment = line.partition("# type: ignore")
        if sep:
            return f"  # type: ignore{comment.split()[0] if comment else ''}"
    return ""


class _Writer:
    def __init__(
        self, rename: dict[str, str], compiled: dict[str, set[str]] | None = None
    ) -> None:
        self.rename = rename
        self.compiled = compiled or {}
        self.out: list[str] = []
        self.used: set[str] = set()

    def _expr(self, node: ast.expr | None) -> str:
        if node is None:
            return ""
        node = ast.parse(ast.unparse(node), mode="eval").body
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                sub.id = self.rename.get(sub.id, sub.id)
                self.used.add(sub.id)
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                # A quoted forward reference: names in it count as used.
                try:
                    inner = ast.parse(sub.value, mode="eval").body
                except SyntaxError:
                    continue
                sub.value = self._expr(inner)
        return ast.unparse(node)

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, lines, indent):
        copy = ast.parse(ast.unparse(fn)).body[0]
        assert isinstance(copy, (ast.FunctionDef, ast.AsyncFunctionDef))
        args = copy.args
        args.defaults = [ast.Constant(...) for _ in args.defaults]
        args.kw_defaults = [d and ast.Constant(...) for d in args.kw_defaults]
        for arg in args.posonlyargs + args.args + args.kwonlyargs:
            arg.annotation = (
                arg.annotation
                and ast.parse(self._expr(arg.annotation), mode="eval").body
            )
        for arg in (args.vararg, args.kwarg):
            if arg is not None and arg.annotation is not None:
                arg.annotation = ast.parse(self._expr(arg.annotation), mode="eval").body
        copy.returns = (
            copy.returns and ast.parse(self._expr(copy.returns), mode="eval").body
        )
        copy.decorator_list = []
        copy.body = [ast.Expr(ast.Constant(...))]
        for deco in fn.decorator_list:  # @x.setter names the property, not a type
            text = ast.unparse(deco)
            setter = isinstance(deco, ast.Attribute) and deco.attr in (
                "setter",
                "deleter",
            )
            self.out.append(f"{indent}@{text if setter else self._expr(deco)}")
        text = ast.unparse(copy).replace("\n    ...", " ...")
        body_line = fn.body[0].lineno - 1 if fn.body else fn.lineno
        self.out.append(indent + text + _ignore_comment(lines, fn.lineno, body_line))

    def cls(self, node: ast.ClassDef, lines, decorators: list[str]) -> None:
        """A class: a public one with its public members, a private one whole.

        Private classes are the bases the public modules build on (their
        private methods are called there).  A public class keeps the private
        members that the compiled core has too (the public modules use some);
        the twin's others are its own.
        """
        private = node.name.startswith("_") or node.name in self.rename
        shared = self.compiled.get(node.name, set())

        def hidden(member: str) -> bool:
            return not (
                private
                or not member.startswith("_")
                or member.endswith("__")
                or member in shared
            )

        bases = ", ".join(self._expr(b) for b in node.bases)
        for decorator in decorators:
            self.out.append(f"@{decorator}")
            self.used.add(decorator)
        header = f"class {self.rename.get(node.name, node.name)}"
        header += f"({bases}):" if bases else ":"
        self.out.append(header + _ignore_comment(lines, node.lineno, node.lineno))
        members = 0
        body: list[ast.stmt] = []
        for stmt in node.body:  # if TYPE_CHECKING: declarations count too
            body.extend(stmt.body if isinstance(stmt, ast.If) else [stmt])
        for stmt in body:
            name = getattr(stmt, "name", None)
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                name = target.id if isinstance(target, ast.Name) else None
            if name == "__slots__":  # non-empty: a disjoint base (PEP 800)
                assert isinstance(stmt, ast.Assign)
                self.out.append(f"    __slots__ = {ast.unparse(stmt.value)}")
                continue
            if name is None or name == "__del__":
                continue
            if hidden(name):
                continue
            members += 1
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(stmt, lines, "    ")
            elif isinstance(stmt, ast.AnnAssign):
                self.out.append(f"    {name}: {self._expr(stmt.annotation)}")
            elif isinstance(stmt, ast.Assign):
                value = stmt.value
                if (
                    isinstance(value, ast.Call)
                    and ast.unparse(value.func) == "property"
                ):
                    # tick_ms = property(lambda self: self._tick_ms, doc=...)
                    self.out.append(f"    @property\n    def {name}(self) -> Any: ...")
                    self.used.add("Any")
                else:
                    raise SystemExit(f"{node.name}.{name}: annotate it in the source")
        for stmt in body:  # instance attributes assigned in __init__
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                for sub in ast.walk(stmt):
                    target = getattr(sub, "target", None) or (
                        sub.targets[0] if isinstance(sub, ast.Assign) else None
                    )
                    if not (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        continue
                    if hidden(target.attr):
                        continue
                    if not isinstance(sub, ast.AnnAssign):
                        if target.attr.startswith("_"):
                            continue  # read in the class only
                        raise SystemExit(
                            f"{node.name}.{target.attr}: annotate it in __init__"
                        )
                    members += 1
                    annotation = self._expr(sub.annotation)
                    self.out.append(f"    {target.attr}: {annotation}")
        if not members:
            self.out.append("    ...")
        self.out.append("")


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, node)
    return found


def _from(sources: str) -> str:
    """The header's "Signatures from" line, wrapped to the line length."""
    return textwrap.fill(f"Signatures from {sources}", 79)


def _module_file(name: str) -> Path:
    """The source of ``tickwheel.<name>``: a module, or a package's ``__init__``."""
    path = PACKAGE / f"{name}.py"
    return path if path.exists() else PACKAGE / name / "__init__.py"


def _defining(path: Path, name: str) -> tuple[Path, ast.stmt | None]:
    """The file that defines ``name`` of the module at ``path``, and the
    definition, through the module's relative imports (a twin split in a
    package re-exports its units' names)."""
    tree = _source(path)[0]
    found = _definitions(tree).get(name)
    if found is not None:
        return path, found
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    unit = path.parent / f"{node.module.replace('.', '/')}.py"
                    return _defining(unit, alias.name)
    return path, None


def _typevar(node: ast.stmt | None) -> bool:
    return (
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "TypeVar"
    )


def _decorators(name: str, stub_name: str, cdef: dict[str, bool]) -> list[str]:
    """A class's or function's decorators in the stub.

    ``@final`` for a class the compiled core marks final, and
    ``@type_check_only`` for a private name that the stub defines but the
    package does not have at runtime.  (The other classes of the compiled
    core are disjoint bases, PEP 800: their C fields rule out a second such
    base.  The stub says so with the twin's ``__slots__``.)
    """
    found = ["final"] if cdef.get(name) else []
    return found + (["type_check_only"] if stub_name.startswith("_") else [])


def _compiled_members(sources: list[Path]) -> dict[str, set[str]]:
    """Per ``cdef class``, the names Python code sees on the compiled core.

    Its ``def``/``cpdef`` methods and ``cdef public``/``readonly`` fields in
    the .pyx and .pxd files (a plain ``cdef`` member is C-only).
    """
    method = re.compile(r"^\s+(?:cp)?def\s+(?:[\w.\[\]]+\s+)*?(\w+)\s*\(")
    field = re.compile(r"^\s+cdef\s+(?:public|readonly)\s+[\w.\[\] ]+\s(\w+)\s*$")
    top = re.compile(r"^(?:cdef|cpdef|def|class|ctypedef|[A-Za-z_]\w*\s*=)\b")
    found: dict[str, set[str]] = {}
    for path in sources:
        current = None
        for line in path.read_text().splitlines():
            head = re.match(r"^cdef class (\w+)", line)
            if head:
                current = found.setdefault(head[1], set())
            elif top.match(line):
                current = None
            elif current is not None:
                match = method.match(line) or field.match(line)
                if match:
                    current.add(match[1])
    return found


def _cdef_classes(pyx: list[Path]) -> dict[str, bool]:
    """The ``cdef class`` names of the compiled modules: True if final."""
    pattern = re.compile(r"^((?:@.*\n)*)cdef class (\w+)", re.M)
    return {
        m[2]: "@cython.final" in m[1]
        for path in pyx
        for m in pattern.finditer(path.read_text())
    }


def _emit(
    writer: _Writer,
    wanted: list[tuple[str, Path]],
    cdef: dict[str, bool] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Write the definitions of ``wanted`` (name, source) in source order."""
    parsed = {path: _source(path) for _, path in wanted}
    imports: dict[str, str] = {}
    for tree, _ in parsed.values():
        for name, stmt in _imports(tree).items():
            imports.setdefault(name, stmt)
    defined: list[str] = []
    for path, (tree, lines) in parsed.items():
        names = {name for name, p in wanted if p == path}
        defs = _definitions(tree)
        for node in tree.body:
            name = getattr(node, "name", None)
            if name is None and isinstance(node, ast.Assign):
                target = node.targets[0]
                name = target.id if isinstance(target, ast.Name) else None
            if name not in names:
                continue
            defined.append(writer.rename.get(name, name))
            if _typevar(node):
                assert isinstance(node, ast.Assign)
                writer.out += [f"{name} = {writer._expr(node.value)}", ""]
            elif isinstance(node, ast.ClassDef):
                stub_name = writer.rename.get(name, name)
                writer.cls(node, lines, _decorators(name, stub_name, cdef or {}))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in _decorators(name, name, cdef or {}):
                    writer.out.append(f"@{decorator}")
                    writer.used.add(decorator)
                writer.function(node, lines, "")
                writer.out.append("")
            else:
                raise SystemExit(f"{path.name}: {name} is not a class or function")
        for name in sorted(writer.used - set(defined)):  # TypeVars used, first
            node = defs.get(name)
            if _typevar(node):
                assert isinstance(node, ast.Assign)
                writer.out[:0] = [f"{name} = {writer._expr(node.value)}", ""]
                defined.append(name)
    return defined, imports


def _import_block(writer: _Writer, defined: list[str], imports: dict[str, str]):
    needed = writer.used - set(defined) - set(dir(builtins))
    needed |= {"TypeVar"} if any("TypeVar(" in line for line in writer.out) else set()
    block = []
    for name in sorted(needed):
        stmt = EXTRA_IMPORTS.get(name) or imports.get(name)
        if stmt is None:
            raise SystemExit(f"no import for {name!r}")
        block.append(stmt)
    return sorted(set(block))


def _reexports(path: Path, skip: set[str]) -> list[str]:
    """``from X import a`` as ``from X import a as a`` (stub re-export)."""
    tree, _ = _source(path)
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names = [a.name for a in node.names if a.name not in skip]
            if names:
                dots = "." * node.level
                aliases = ", ".join(f"{n} as {n}" for n in names)
                out.append(f"from {dots}{node.module or ''} import {aliases}")
    return out


def _all(path: Path) -> str:
    tree, _ = _source(path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            return ast.unparse(node)
    raise SystemExit(f"{path.name} has no __all__")


def init_stub() -> str:
    """``tickwheel/__init__.pyi``: the twins' classes that ``_impl`` hands out."""
    impl, _ = _source(PACKAGE / "_impl.py")
    modules = {"core": "_wheel_py", "_purgatory_mod": "_purgatory_py"}
    modules["_kafka_mod"] = "_kafka_py"
    wanted: list[tuple[str, Path]] = []
    for node in ast.walk(impl):  # TimerTask = core.TimerTask, ...
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in modules
        ):
            module = _module_file(modules[node.value.value.id])
            path, source = _defining(module, node.value.attr)
            if isinstance(source, (ast.ClassDef, ast.FunctionDef)):
                wanted.append((node.value.attr, path))
    for name, path in list(wanted):  # the TypeVars they use
        for var, node in _definitions(_source(path)[0]).items():
            if _typevar(node) and (var, path) not in wanted:
                wanted.append((var, path))
    modules = ("_wheel", "_purgatory", "_kafka")
    pxd = [PACKAGE / f"{m}.pxd" for m in modules]
    # A module's .pyx and the .pxi units it includes.
    pyx = [p for m in modules for p in sorted(PACKAGE.glob(f"{m}*.px[i]"))]
    pyx += [PACKAGE / f"{m}.pyx" for m in modules]
    writer = _Writer(RENAME, _compiled_members(pyx + pxd))
    defined, imports = _emit(writer, wanted, _cdef_classes(pyx))
    body = writer.out
    sources = ", ".join(sorted({p.relative_to(PACKAGE).as_posix() for _, p in wanted}))
    text = HEADER.format(sources=_from(sources), example="``tickwheel.TimerTask``")
    text += "\n".join(_import_block(writer, defined, imports)) + "\n\n"
    text += "\n".join(_reexports(PACKAGE / "__init__.py", set(defined))) + "\n\n"
    text += _all(PACKAGE / "__init__.py") + "\n\n"
    return text + "\n".join(body) + "\n"


def compat_asyncio_stub() -> str:
    """``tickwheel/compat_asyncio.pyi``: its public names, defined there."""
    module = PACKAGE / "compat_asyncio.py"
    tree, _ = _source(module)
    wanted: list[tuple[str, Path]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                item = (alias.name, PACKAGE / f"{node.module}.py")
                if item not in wanted:
                    wanted.append(item)
    writer = _Writer({})
    defined, imports = _emit(writer, wanted)
    # The layer below: the core's classes come from _impl (public to mypy).
    for name in ("TimerCore", "TimerTask"):
        imports[name] = f"from ._impl import {name}"
    defined_set = set(defined)
    writer.used.add("sys")  # the __all__ condition below
    lines = writer.out
    if "_PolicyBase" in writer.used:  # EventLoopPolicy's base is chosen at import
        defined_set.add("_PolicyBase")
        writer.used.add("Any")
        lines = ["_PolicyBase: Any", ""] + lines
    sources = ", ".join(sorted({p.name for _, p in wanted}))
    example = "``tickwheel.compat_asyncio.Timeout``"
    text = HEADER.format(sources=_from(sources), example=example)
    text += "\n".join(_import_block(writer, sorted(defined_set), imports)) + "\n\n"
    for node in tree.body:  # __all__, and its addition below 3.14
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            text += ast.unparse(node) + "\n"
        elif isinstance(node, ast.If) and "__all__ +=" in ast.unparse(node):
            added = [s for s in node.body if isinstance(s, ast.AugAssign)]
            test = ast.unparse(node.test).replace("TYPE_CHECKING or ", "")
            text += f"if {test}:\n    {ast.unparse(added[0])}\n"
    return text + "\n" + "\n".join(lines) + "\n"


STUBS = {"__init__.pyi": init_stub, "compat_asyncio.pyi": compat_asyncio_stub}


def _format(text: str) -> str:
    """ruff's formatting (as the repository's lint runs it), when ruff is here."""
    ruff = shutil.which("ruff")
    if ruff is None:
        return text
    for args in (["check", "--select", "I", "--fix"], ["format"]):
        text = subprocess.run(
            [ruff, *args, "--quiet", "--stdin-filename", "stub.pyi", "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=PACKAGE.parents[1],
        ).stdout
    return text


def _normal(text: str) -> tuple[list[tuple[str, str, str, int]], list[str]]:
    """The imports as a sorted list of single names, and the other statements."""
    imports, others = set(), []
    for node in ast.parse(text).body:
        if isinstance(node, ast.Import):
            imports |= {("", a.name, a.asname or "", 0) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            imports |= {
                (module, a.name, a.asname or "", node.level) for a in node.names
            }
        else:
            others.append(ast.dump(node))
    return sorted(imports), others


def same(a: str, b: str) -> bool:
    """Equal as Python: formatting, comments and the order of imports aside."""
    return _normal(a) == _normal(b)


def main(argv: list[str]) -> int:
    stale = []
    for name, make in STUBS.items():
        path = PACKAGE / name
        text = make()
        if path.exists() and same(text, path.read_text(encoding="utf-8")):
            continue
        stale.append(name)
        if "--check" not in argv:
            path.write_text(_format(text), encoding="utf-8")
    if stale and "--check" in argv:
        print(f"stale: {', '.join(stale)}; run python {Path(__file__).name}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
