"""Staging and commit of a replay's outputs (tickwheel.spark.commit), without Spark.

Each test builds the file tree a run (or a killed run) would leave and
checks what OUTPUT holds after: the whole result or what was there before,
never a mix, and never a file the tool did not write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tickwheel.spark import commit
from tickwheel.spark.validate import ReplayUsageError, check_output, read_manifest


def tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): p.read_text()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def staged_run(output: Path, tag: str, plots: bool = True) -> str:
    """A staging directory holding what a run writes (contents tagged)."""
    staging = commit.stage(str(output))
    base = Path(staging)
    for name in ("outcomes", "purgatory_size", "rejected"):
        (base / name).mkdir()
        (base / name / "part-0.parquet").write_text(f"{tag} {name}")
    (base / "summary.json").write_text(json.dumps({"run": tag}))
    if plots:
        (base / "latency_cdf.png").write_text(tag)
    return staging


def test_commit_to_a_new_output_is_one_rename_with_the_manifest_last(tmp_path):
    out = tmp_path / "out"
    staging = staged_run(out, "one")
    written = commit.commit(staging, str(out), {"input": "events"})
    assert not os.path.exists(staging)
    assert sorted(os.listdir(tmp_path)) == ["out"]
    manifest = read_manifest(str(out))
    assert manifest is not None and manifest["written"] == written
    assert set(written) == set(os.listdir(out))
    assert manifest["settings"] == {"input": "events"}


def test_overwrite_replaces_only_what_the_manifest_lists(tmp_path):
    out = tmp_path / "out"
    commit.commit(staged_run(out, "one"), str(out), {})
    (out / "notes.txt").write_text("mine")
    (out / "outcomes" / "extra.txt").write_text("inside a run's dataset")
    check_output(str(out), overwrite=True)  # the manifest makes it ours
    with pytest.raises(ReplayUsageError, match="not empty"):
        check_output(str(out), overwrite=False)
    commit.commit(staged_run(out, "two", plots=False), str(out), {})
    files = tree(out)
    assert files["notes.txt"] == "mine"
    assert files["outcomes/part-0.parquet"] == "two outcomes"
    assert "outcomes/extra.txt" not in files  # the old dataset went whole
    assert "latency_cdf.png" not in files  # run one's plot, not rewritten: gone
    assert json.loads(files["summary.json"]) == {"run": "two"}
    manifest = read_manifest(str(out))
    assert manifest is not None and "latency_cdf.png" not in manifest["written"]
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_file_url_output_is_checked_as_a_local_path(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("x")
    with pytest.raises(ReplayUsageError, match="not empty"):
        check_output(f"file://{out}", overwrite=False)


def test_a_file_no_run_wrote_is_never_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("mine")
    with pytest.raises(ReplayUsageError, match=r"summary\.json, which no earlier"):
        check_output(str(out), overwrite=True)
    assert tree(out) == {"summary.json": "mine"}


def test_output_not_writable_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(out) else real(p, mode)
    )
    with pytest.raises(ReplayUsageError, match="is not writable"):
        check_output(str(out), overwrite=False)


def _kill_between_renames(out: Path, staging: str, moves: int) -> None:
    """Do commit()'s journal and the first ``moves`` renames, then 'die'."""
    real = os.rename
    count = [0]

    def rename(src: str, dst: str) -> None:
        if count[0] == moves:
            raise KeyboardInterrupt  # the process dies here
        count[0] += 1
        real(src, dst)

    os.rename = rename  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            commit.commit(staging, str(out), {})
    finally:
        os.rename = real


@pytest.mark.parametrize("moves", [0, 1, 3, 5, 7])
def test_a_commit_killed_between_renames_is_finished_by_the_next_run(tmp_path, moves):
    out = tmp_path / "out"
    commit.commit(staged_run(out, "one"), str(out), {})
    (out / "notes.txt").write_text("mine")
    # Run two, in a process that has exited (its pid is dead).
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(child.stdout)
    staging = staged_run(out, "two", plots=False)
    dead_staging = commit.staging_path(str(out), dead)
    os.rename(staging, dead_staging)
    _kill_between_renames(out, dead_staging, moves)
    if moves:
        assert read_manifest(str(out)) is None  # visibly incomplete
    done = commit.recover(str(out))
    assert done == [f"finished moving the results of a killed run into {out}"]
    files = tree(out)
    assert files["notes.txt"] == "mine"
    assert json.loads(files["summary.json"]) == {"run": "two"}
    assert "latency_cdf.png" not in files
    assert all(
        files[f"{d}/part-0.parquet"] == f"two {d}"
        for d in ("outcomes", "purgatory_size", "rejected")
    )
    assert read_manifest(str(out)) is not None
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_recover_removes_dead_staging_and_keeps_a_live_one(tmp_path):
    out = tmp_path / "out"
    live = commit.stage(str(out))  # this process: alive
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = commit.staging_path(str(out), int(child.stdout))
    os.makedirs(os.path.join(dead, "union-staging"))
    other = tmp_path / ".other.tickwheel-staging-1"  # another OUTPUT's
    other.mkdir()
    assert commit.recover(str(out)) == [
        f"removed {os.path.basename(dead)} (staging of a killed run)"
    ]
    assert os.path.isdir(live) and other.is_dir() and not os.path.exists(dead)


def test_validate_docstring_examples():
    import doctest

    from tickwheel.spark import validate

    result = doctest.testmod(validate)
    assert result.attempted > 0 and result.failed == 0
