"""Peak memory of a rule-based `stratagem eval` run folder at 2.2k and 22k episodes.

Each size runs in a fresh process (IPD, every pool, the Mixed strategy: 11 opponents, so 200
and 2,000 episodes per opponent); peak RSS is that process's ``ru_maxrss``. Metrics stream from
the trace file (a small summary per episode), so memory should barely grow with the run.
Run: ``python benchmarks/memory.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import resource, sys
sys.argv = ["stratagem", "eval", "--game", "ipd", "--agent", "strategy:Mixed",
            "--episodes", sys.argv[1], "--out", sys.argv[2]]
from stratagem.cli.main import main
try:
    main()
except SystemExit:
    pass
print("RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, file=sys.stderr)
"""


def peak(episodes: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-c", CHILD, str(episodes), f"{tmp}/run"],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - start
    line = next(x for x in r.stderr.splitlines() if x.startswith("RSS"))
    return float(line.split()[1]), seconds


def main() -> None:
    rows = []
    for per_opponent in (200, 2000):
        runs = [peak(per_opponent) for _ in range(3)]
        rows.append(
            (
                per_opponent * 11,
                statistics.median(r[0] for r in runs),
                statistics.median(r[1] for r in runs),
            )
        )
    print("| episodes | peak RSS (MiB) | seconds |")
    print("| ---: | ---: | ---: |")
    for n, rss, sec in rows:
        print(f"| {n:,} | {rss:.0f} | {sec:.1f} |")
    print(f"peak RSS at 22k ÷ 2.2k: {rows[1][1] / rows[0][1]:.2f} (medians of 3)")


if __name__ == "__main__":
    main()
