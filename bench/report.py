"""Turn a pytest-benchmark JSON into a Markdown table of ns/op and ratios.

Usage: ``python bench/report.py bench/results/<file>.json``
Ratios are medians divided by tickwheel's median in the same group.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> int:
    data = json.load(open(path))
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in data["benchmarks"]:
        impl = bench["params"]["impl"]
        n = bench["extra_info"]["n"]
        groups[bench["group"]][impl] = bench["stats"]["median"] / n * 1e9
    machine = data["machine_info"]
    commit = data.get("commit_info", {}).get("id", "?")[:10]
    print(
        f"Machine: {machine.get('cpu', {}).get('brand_raw', '?')}, "
        f"Python {machine['python_version']}, commit {commit}; median of rounds.\n"
    )
    impls = sorted(
        {i for g in groups.values() for i in g}, key=lambda i: (i != "tickwheel", i)
    )
    print("| workload | " + " | ".join(impls) + " |")
    print("|---|" + "---|" * len(impls))
    for group, res in sorted(groups.items()):
        base = res.get("tickwheel")
        cells = []
        for impl in impls:
            if impl not in res:
                cells.append("–")
            elif impl == "tickwheel" or base is None:
                cells.append(f"{res[impl]:,.0f} ns")
            else:
                cells.append(f"{res[impl]:,.0f} ns ({res[impl] / base:.1f}×)")
        print(f"| {group} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
