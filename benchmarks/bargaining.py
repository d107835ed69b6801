"""Bargaining round-robin benchmark: ``python benchmarks/bargaining.py``.

A 5-agent rule-based round robin in both roles (25 pairings) on 600 scenarios = 15,000
negotiations, timed end to end (play + traces + the bargaining report: tables, per-regime heatmaps,
profiles, HTML), and the peak resident memory of the same run at 1,000 and at 15,000
negotiations, each in a fresh subprocess, side by side.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

AGENTS = "Boulware,Linear,Conceder,TitForTatConcession,NaiveAccepter"
CHILD = """
import json, resource, sys, time
from stratagem.games import get_game
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin
gft, ngft, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
game = get_game("bargaining", split="test")
agents = {n: get_strategy("bargaining", n) for n in sys.argv[4].split(",")}
sc = game.tournament_scenarios(gft, ngft, seed=42)
start = time.perf_counter()
result = round_robin(game, agents, out, count=len(sc), scenarios=sc)
seconds = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"episodes": result.episodes, "seconds": seconds, "peak_mib": peak_kib / 1024}))
"""


def run(gft: int, ngft: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(gft), str(ngft), str(Path(tmp) / "rr"), AGENTS],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print("bargaining round robin · 5 rule-based agents × both roles · median of 3")
    small = [run(27, 13) for _ in range(3)]  # 40 scenarios × 25 pairings = 1,000 negotiations
    large = [run(400, 200) for _ in range(3)]  # 600 × 25 = 15,000
    s_small = statistics.median(r["seconds"] for r in small)
    s_large = statistics.median(r["seconds"] for r in large)
    m_small = statistics.median(r["peak_mib"] for r in small)
    m_large = statistics.median(r["peak_mib"] for r in large)
    print("\n| negotiations | seconds | negotiations / s | peak RSS (MiB) |")
    print("| ---: | ---: | ---: | ---: |")
    print(
        f"| {small[0]['episodes']:,} | {s_small:.2f} | {small[0]['episodes'] / s_small:,.0f} | "
        f"{m_small:.0f} |"
    )
    print(
        f"| {large[0]['episodes']:,} | {s_large:.2f} | {large[0]['episodes'] / s_large:,.0f} | "
        f"{m_large:.0f} |"
    )
    print(f"\npeak memory ratio 15k / 1k: {m_large / m_small:.2f}")


if __name__ == "__main__":
    main()
