"""The test tiers: what ``python -m pytest`` leaves out still runs somewhere.

pyproject.toml's ``addopts`` deselects the slow tiers (``-m 'not spark and
not ...'``).  A marker added there and selected by no CI step would drop its
tests from every run, silently.  So each tier it deselects is registered
with a description, named in the README with its command, and selected by a
step of ``.ci/run`` (directly or through the scripts it calls) or of
GitHub's ci.yml; and every
test file is one pytest collects.  docs/development.md, "Test tiers", has
the tiers and their cost.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: .ci/run and the scripts it calls; ci.yml (GitHub) runs the docs tier.
CI_SCRIPTS = [ROOT / ".ci" / name for name in ("run", "suite", "freethreaded")]
CI_SCRIPTS.append(ROOT / ".github" / "workflows" / "ci.yml")
NAME = re.compile(r"[a-z_]+")


def _tiers(config: pytest.Config) -> list[str]:
    """The markers the default run deselects (pyproject's addopts)."""
    addopts = config.getini("addopts")
    expr = addopts[addopts.index("-m") + 1]
    terms = expr.split(" and ")
    assert all(re.fullmatch(r"not [a-z_]+", t) for t in terms), expr
    return [t[len("not ") :] for t in terms]


def _selects(expr: str, marks: set[str]) -> bool:
    """Whether ``-m expr`` selects a test carrying ``marks`` (and/or/not)."""
    words = re.findall(r"[()]|[^\s()]+", expr)
    assert all(w in "()" or NAME.fullmatch(w) for w in words), expr
    code = " ".join(
        w if w in ("and", "or", "not", "(", ")") else str(w in marks) for w in words
    )
    return bool(eval(code or "True"))  # only True, False, and/or/not, ()


def _ci_expressions() -> list[str]:
    """Every ``-m`` expression the CI scripts pass to pytest."""
    found = []
    for script in CI_SCRIPTS:
        found += re.findall(r"""-m (?:"([^"]*)"|'([^']*)')""", script.read_text())
    # One built from a shell variable ("not replay and ${MARKS[1]}") only
    # narrows a literal one.
    return [e for e in (d or s for d, s in found) if "$" not in e]


def test_selects_reads_marker_expressions():
    assert _selects("spark or stress", {"stress"})
    assert not _selects("not spark and not stress", {"stress", "c_extension"})
    assert _selects("", {"cluster"})
    assert not _selects("(spark or leaks) and not cluster", {"spark", "cluster"})


def test_each_tier_is_registered_named_in_the_readme_and_run_by_ci(pytestconfig):
    tiers = _tiers(pytestconfig)
    assert {"spark", "stress", "twin_full", "cluster"} <= set(tiers), tiers
    registered = dict(m.split(": ", 1) for m in pytestconfig.getini("markers"))
    readme = (ROOT / "README.md").read_text()
    expressions = _ci_expressions()
    assert expressions, CI_SCRIPTS
    for tier in tiers:
        assert registered.get(tier, "").startswith("tier"), (tier, registered)
        assert re.search(rf"-m \"?{tier}\b", readme), f"README: no `-m {tier}`"
        assert any(_selects(e, {tier}) for e in expressions), (
            f"no CI step selects the {tier} tier: {expressions}"
        )
    # And no marker is described as a tier that the default run keeps.
    described = {m for m, text in registered.items() if text.startswith("tier")}
    assert described == set(tiers)


def test_every_test_file_is_collected(pytestconfig):
    """A test outside a test_*.py file, or an ignored path, would never run."""
    assert pytestconfig.getini("python_files") == ["test_*.py", "*_test.py"]
    assert "tests" in pytestconfig.getini("testpaths")
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text()
        assert "collect_ignore" not in text or path == Path(__file__), path
        if not path.name.startswith("test_"):
            assert not re.search(r"^(def test_|class Test)", text, re.M), path
