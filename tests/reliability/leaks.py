"""Full-size leak run (docs/reliability.md): 10^7 add+cancel and 10^6 add+fire.

Runs ``tests/isolated/leak_check.py`` in a fresh interpreter per core and
prints a Markdown table (RSS and tracemalloc deltas after warm-up, reference
counts, what the cyclic GC found).  ``tests/test_leaks.py`` runs the same
script at CI size.

    python tests/reliability/leaks.py [--cancel N] [--fire N]
        [--core c|pure|both] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

SCRIPT = (
    pathlib.Path(__file__).resolve().parent.parent
    / "isolated"
    / "leak_check.py"
)


def run(core: str, cancel: int, fire: int) -> dict:
    env = dict(os.environ)
    if core == "pure":
        env["TICKWHEEL_NO_EXTENSIONS"] = "1"
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--core",
            core,
            "--cancel",
            str(cancel),
            "--fire",
            str(fire),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    if not out.stdout:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cancel", type=int, default=10_000_000)
    parser.add_argument("--fire", type=int, default=1_000_000)
    parser.add_argument("--core", choices=["c", "pure", "both"], default="both")
    parser.add_argument("--json")
    args = parser.parse_args()
    cores = ["c", "pure"] if args.core == "both" else [args.core]
    reports = [run(core, args.cancel, args.fire) for core in cores]
    print(
        "| core | phase | cycles | RSS after warm-up | RSS delta | tracemalloc delta "
        "| seconds |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for rep in reports:
        for r in rep["results"]:
            if r["phase"] in ("cancel", "fire"):
                what = "add+cancel" if r["phase"] == "cancel" else "add+fire"
                print(
                    f"| {rep['core']} | {what} | {r['cycles']:,} | "
                    f"{r['rss_kb_after_warmup']:,} KiB | {r['rss_delta_kb']:+,} KiB | "
                    f"{r['tracemalloc_delta_b']:+,} B | {r['seconds']} |"
                )
    for rep in reports:
        ph = {r["phase"]: r for r in rep["results"]}
        print(
            f"\n{rep['core']}: gc.collect() after a cycle of use = "
            f"{ph['gc']['collected']}, "
            f"tickwheel objects in gc.garbage = {len(ph['gc']['tickwheel_objects'])}; "
            f"refcount deltas fn/arg = {ph['refs']['fn_refcount_delta']}/"
            f"{ph['refs']['arg_refcount_delta']}; failures = {rep['failures']}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    return 1 if any(rep["failures"] for rep in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
