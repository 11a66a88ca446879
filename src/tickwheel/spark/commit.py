"""Never half-written outputs: stage beside OUTPUT, then move into place.

Why: a replay writes three Parquet datasets, a summary and two plots over
tens of seconds.  Written straight into OUTPUT, a job killed half-way (a
``kill -9``, an OOM, a lost laptop lid) would leave old and new files mixed,
which a later reader cannot tell from a result.  So the run writes
everything into a staging directory *beside* OUTPUT (same file system, so
moving is a rename, not a copy)::

    out/                                  the OUTPUT, untouched until the end
    .out.tickwheel-staging-4242/          this run (pid 4242)
        outcomes/ purgatory_size/ rejected/ summary.json *.png _SUCCESS

and at the end:

* if OUTPUT does not exist or is empty, one ``rename(2)`` of the staging
  directory: OUTPUT is either as it was or complete;
* otherwise (``--overwrite`` over an earlier run, or ``--demo`` next to its
  ``input/``) the staging directory first gets a journal (``_COMMITTING``),
  OUTPUT loses its old ``_SUCCESS``, the entries the previous run listed in
  its manifest move out, the new ones move in, and the new ``_SUCCESS`` goes
  last.  A kill between those renames (milliseconds) leaves OUTPUT without
  ``_SUCCESS``, and the next ``tickwheel replay`` naming that OUTPUT finishes
  the move from the journal (:func:`recover`) before anything else.

``_SUCCESS`` holds the manifest (JSON): the entries this run wrote.  With
``--overwrite`` only those are ever replaced or removed; files the tool did
not create are never touched.  A staging directory whose process is gone
(killed) and that has no journal is deleted by the next run on that OUTPUT.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from typing import Any

from .validate import MANIFEST, OUTPUT_ENTRIES, read_manifest

__all__ = ["OUTPUT_ENTRIES", "commit", "recover", "stage"]

JOURNAL = "_COMMITTING"
_TRASH = ".replaced"


def _staging_re(output: str) -> re.Pattern[str]:
    name = re.escape(os.path.basename(os.path.abspath(output)))
    return re.compile(rf"\.{name}\.tickwheel-staging-(\d+)")


def staging_path(output: str, pid: int | None = None) -> str:
    """``.OUTPUT.tickwheel-staging-<pid>`` in OUTPUT's parent directory."""
    path = os.path.abspath(output)
    pid = os.getpid() if pid is None else pid
    return os.path.join(
        os.path.dirname(path), f".{os.path.basename(path)}.tickwheel-staging-{pid}"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(output: str) -> list[str]:
    """Finish or delete the staging directories of dead runs on ``output``.

    :return: what was done, one line each (for the progress output)
    """
    parent = os.path.dirname(os.path.abspath(output))
    pattern = _staging_re(output)
    done = []
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        match = pattern.fullmatch(name)
        if (
            not match
            or _alive(int(match.group(1)))
            or int(match.group(1)) == os.getpid()
        ):
            continue
        staging = os.path.join(parent, name)
        if os.path.exists(os.path.join(staging, JOURNAL)):
            _roll_forward(staging, output)
            done.append(f"finished moving the results of a killed run into {output}")
        else:
            shutil.rmtree(staging, ignore_errors=True)
            done.append(f"removed {name} (staging of a killed run)")
    return done


def stage(output: str) -> str:
    """Create (empty) this run's staging directory beside ``output``."""
    staging = staging_path(output)
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    return staging


def _manifest(
    staging: str,
    settings: dict[str, Any],
    tool: str = "tickwheel replay",
    entries: tuple[str, ...] = OUTPUT_ENTRIES,
) -> dict[str, Any]:
    from .. import __version__

    written = sorted(n for n in os.listdir(staging) if n in entries)
    return {
        "tool": tool,
        "version": __version__,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "written": sorted(set(written) | {MANIFEST}),
        "settings": settings,
    }


def commit(
    staging: str,
    output: str,
    settings: dict[str, Any],
    *,
    tool: str = "tickwheel replay",
    entries: tuple[str, ...] = OUTPUT_ENTRIES,
) -> list[str]:
    """Move the staged results into ``output``; ``_SUCCESS`` (the manifest) last.

    ``tool`` and ``entries``: the command whose output this is and every
    entry it may write (``tickwheel import-request-log`` has its own).

    :return: the entries written (the manifest's list)
    """
    manifest = _manifest(staging, settings, tool, entries)
    with open(os.path.join(staging, MANIFEST), "w") as fh:
        json.dump(manifest, fh, indent=2)
    if not os.path.exists(output) or not os.listdir(output):
        if os.path.isdir(output):
            os.rmdir(output)  # rename(2) would replace it; this is portable
        os.rename(staging, output)
        return list(manifest["written"])
    old = read_manifest(output, tool)
    old_written = [n for n in (old or {}).get("written", []) if n in entries]
    journal = {"remove": old_written, "add": manifest["written"]}
    with open(os.path.join(staging, JOURNAL), "w") as fh:
        json.dump(journal, fh)
        fh.flush()
        os.fsync(fh.fileno())
    _roll_forward(staging, output)
    return list(manifest["written"])


def _roll_forward(staging: str, output: str) -> None:
    """Carry out a journal: old entries out, new ones in, ``_SUCCESS`` last.

    Idempotent: a run killed half-way through is finished by calling this again.
    """
    with open(os.path.join(staging, JOURNAL)) as fh:
        journal = json.load(fh)
    trash = os.path.join(staging, _TRASH)
    os.makedirs(trash, exist_ok=True)
    marker = os.path.join(output, MANIFEST)
    if os.path.exists(os.path.join(staging, MANIFEST)) and os.path.exists(marker):
        os.remove(marker)  # OUTPUT is now visibly incomplete
    os.makedirs(output, exist_ok=True)
    for name in journal["remove"]:
        # A name in both lists is replaced below (or was, before a kill).
        if name in journal["add"]:
            continue
        if os.path.lexists(os.path.join(output, name)):
            os.rename(os.path.join(output, name), os.path.join(trash, name))
    for name in journal["add"]:
        src = os.path.join(staging, name)
        if name != MANIFEST and os.path.lexists(src):
            if os.path.lexists(os.path.join(output, name)):
                os.rename(os.path.join(output, name), os.path.join(trash, name))
            os.rename(src, os.path.join(output, name))
    if os.path.exists(os.path.join(staging, MANIFEST)):
        os.rename(os.path.join(staging, MANIFEST), marker)
    shutil.rmtree(staging, ignore_errors=True)
