"""The shell blocks of the README and docs/, as a user pastes them.

tickwheel is not on any package index yet, so every install line must work
from a checkout as written (``pip install ".[spark]"``, never
``pip install "tickwheel[spark]"``).  Two tests:

* every command of every ``sh``/``bash`` block is classified: run here by
  :func:`test_docs_shell_blocks_run` or listed in :data:`NOT_HERE` with the
  reason it cannot run in a test (a placeholder path, a cluster, the suite
  itself); every ``pip install`` line installs from the checkout or names
  packages an index has (fast, always run);
* marked ``docs`` (minutes; ``python -m pytest -m docs``, a step of
  ``.ci/run``): each install line is resolved with ``pip install --dry-run``
  in a fresh venv, in a copy of the checkout, with the user's pip settings
  (resolution and the project's metadata; tests/test_dist.py compiles);
  the ``tickwheel`` commands run as written, in order, in one directory
  (the ``tickwheel`` of the environment running the tests).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Commands that cannot run in a test, by a pattern of their text: why.
NOT_HERE = {
    r"tickwheel replay events[/.]": "events/ is the user's own log (or the 1M "
    "requests gen-trace writes: a replay of minutes)",
    r"/var/log/kafka": "a broker's log directory; the README's import of "
    "tests/data/request-sample.log.gz runs",
    r"tickwheel\.spark\.cluster|--master": "a standalone cluster: tests/spark/"
    "test_cluster.py starts one (-m cluster)",
    r"--remote": "a Spark Connect server: tests/spark/test_cluster.py (-m cluster)",
    r"python -m pytest": "the test suite itself (.ci/run's README test command)",
    r"pip install dist/": "a prebuilt wheel: tests/test_dist.py builds one and "
    "installs it in a venv without a compiler",
    r"tests/reliability/stress\.py": "minutes of real threads at full load; "
    "tests/test_stress.py runs it smaller",
    r"tests/reliability/leaks\.py": "fresh interpreters for minutes; "
    "tests/test_leaks.py (marker leaks) runs the same checks",
    r"tests/asan/run\.sh": "needs clang and libclang-rt (apt-get) for its own "
    "AddressSanitizer build",
    r"thread-sanitizer|t-tsan|\.ci/tsan|fsanitize=thread|TSAN_OPTIONS":
    "ThreadSanitizer: a CPython built --with-thread-sanitizer (12 minutes on "
    "2 cores) and extensions built against it (docs/reliability.md)",
    r"venv-pack -p": "packs the venv of the line above (hundreds of MB) for a "
    "cluster's executors",
}


def _blocks(path: Path) -> list[str]:
    """The commands of the shell blocks of ``path`` (continuations joined)."""
    commands: list[str] = []
    inside = False
    pending = ""
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            inside = not inside and line[3:].strip() in ("sh", "bash", "shell")
            continue
        if not inside or not line.strip() or line.lstrip().startswith("#"):
            continue  # outside a block, blank, or a whole-line comment
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        commands.append(re.sub(r"\s+#\s.*$", "", line))  # the trailing comment
    return commands


def _commands() -> list[tuple[str, str]]:
    """(file, command) for every shell command in the docs."""
    return [(p.relative_to(ROOT).as_posix(), c) for p in DOCS for c in _blocks(p)]


def _why_not(command: str) -> str | None:
    for pattern, reason in NOT_HERE.items():
        if re.search(pattern, command):
            return reason
    return None


def _pip_installs(command: str) -> list[tuple[dict[str, str], list[str]]]:
    """(environment, arguments) of each ``pip install`` in ``command``."""
    out = []
    for part in command.split("&&"):
        words = shlex.split(part)
        env = {}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if len(words) > 1 and words[0].endswith("pip") and words[1] == "install":
            out.append((env, words[2:]))
    return out


def _extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^(\w+) = \[", section, re.M))


def test_docs_install_lines_work_from_a_checkout():
    """No install line asks an index for tickwheel; extras named exist."""
    commands = _commands()
    assert len(commands) > 15, commands  # the parser found the blocks
    installs = [(f, c, a) for f, c in commands for _, a in _pip_installs(c)]
    assert len(installs) >= 8, installs
    extras = _extras()
    for file, command, args in installs:
        for arg in args:
            if arg.startswith("-"):
                continue
            name = re.split(r"[\[<>=;]", arg, maxsplit=1)[0]
            assert name.lower() != "tickwheel", (
                f"{file}: `{command}` installs tickwheel from an index, where it "
                'is not: install the checkout (`pip install .`, `".[spark]"`)'
            )
            if name == ".":
                wanted = re.findall(r"\w+", arg.partition("[")[2])
                assert set(wanted) <= extras, (file, command, wanted, extras)


def test_every_docs_command_runs_in_a_test_or_says_why_not():
    """Run here: pip installs and tickwheel commands (after a ``python -m venv``)."""
    runnable = [c for _, c in _commands() if _why_not(c) is None]
    for command in runnable:
        for part in command.split("&&"):
            words = shlex.split(part)
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words.pop(0)
            ok = words[:1] == ["tickwheel"] or _pip_installs(part)
            ok = ok or words[:3] == ["python", "-m", "venv"]
            assert ok, (
                f"`{command}`: run it in test_docs_shell_blocks_run or "
                "list it in NOT_HERE with the reason"
            )
    # The listed reasons all still apply to some command (no stale entries).
    texts = [c for _, c in _commands()]
    for pattern in NOT_HERE:
        assert any(re.search(pattern, c) for c in texts), pattern


# -- running them (marker docs) -------------------------------------------------
def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    took = time.perf_counter() - start
    print(f"$ {shlex.join(argv)}  (exit {done.returncode}, {took:.1f} s)")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.docs
def test_docs_shell_blocks_run(tmp_path):
    if not (ROOT / "setup.py").is_file():
        pytest.skip("needs the source tree, not an installed copy of the tests")
    checkout = tmp_path / "checkout"
    shutil.copytree(
        ROOT,
        checkout,
        ignore=shutil.ignore_patterns(
            ".git",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            "*.so",
            "*.c",
            "*.html",
            ".hypothesis",
            ".mypy_cache",
            ".ruff_cache",
            "out",
        ),
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    fresh = {**base, "PATH": f"{venv / 'bin'}{os.pathsep}{base['PATH']}"}
    fresh.pop("VIRTUAL_ENV", None)
    seen: set[tuple[str, ...]] = set()
    tickwheel_commands = []
    for file, command in _commands():
        if _why_not(command) is not None:
            continue
        for env, args in _pip_installs(command):
            if tuple(args) in seen:  # TICKWHEEL_* only change what is built
                continue
            seen.add(tuple(args))
            print(f"-- {file}: {command}")
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--dry-run"]
            _run([*pip, "--quiet", *args], checkout, {**fresh, **env}, 900)
        for part in command.split("&&"):
            if part.split()[0] == "tickwheel":
                tickwheel_commands.append((file, part.strip()))
    # The tickwheel commands, in the docs' order, in one directory, as written
    # (relative paths such as tests/data/... are the checkout's).
    here = {**base, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{base['PATH']}"}
    assert shutil.which("tickwheel", path=here["PATH"]), "tickwheel is not installed"
    done = set()
    for file, command in tickwheel_commands:
        if command in done:
            continue
        done.add(command)
        print(f"-- {file}: {command}")
        out = _run(shlex.split(command), checkout, here, 1800)
        if "replay" in command:
            assert "total " in out, out
