"""Each module of the package imports only downward: no import cycles.

A cycle (``a`` imports ``b``, which imports ``a``, at the top or inside a
function) means neither module can be read, tested or changed alone, and
which half runs first depends on who imported whom.  The graph is built from
the source (``ast``), so imports inside functions count too.  A module's
imports of its own parent packages (``from .. import __version__``) are not
edges: Python imports a package before any module in it anyway.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tickwheel

ROOT = Path(tickwheel.__file__).parent

#: Cycles tolerated for now: none (an entry here is a frozenset of modules).
KNOWN: set[frozenset[str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m != name and m not in ancestors}


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_sees_imports_inside_functions():
    mods = _modules()
    assert "tickwheel.spark.commit" in mods and "tickwheel.cli" in mods
    edges = _imports("tickwheel.cli._replay", mods["tickwheel.cli._replay"], set(mods))
    # Imported inside run_replay_command only.
    assert "tickwheel.spark.job" in edges and "tickwheel.cli._common" in edges
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [frozenset("ab")]


def test_no_import_cycles():
    mods = _modules()
    graph = {name: _imports(name, path, set(mods)) for name, path in mods.items()}
    cycles = [sorted(c) for c in _cycles(graph) if c not in KNOWN]
    assert not cycles, f"import cycles: {cycles}"


def test_the_command_line_has_one_home():
    """The CLI lives in tickwheel.cli; __main__ only calls it."""
    mods = _modules()
    assert "tickwheel._import_cli" not in mods
    graph = _imports("tickwheel.__main__", mods["tickwheel.__main__"], set(mods))
    assert graph == {"tickwheel.cli"}
