"""How fast the command line answers: ``python benchmarks/cli_help.py [--baseline DIR]``.

Times ``stratagem --help``, ``stratagem eval --help`` and ``stratagem train sepo --help``, each in
a fresh Python process (what a person typing them waits for), ``--repeats`` times, and prints the
median wall time with the number of stratagem modules and of heavy libraries each loaded. With
``--baseline DIR`` (a checkout of another commit: ``git worktree add /tmp/old a52eee7``) the same
commands run against that tree's ``src/`` too, side by side, with the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = ([], ["eval"], ["train", "sepo"])
HEAVY = ("torch", "transformers", "pandas", "matplotlib", "numpy", "scipy")
CHILD = f"""
import json, sys
from stratagem.cli.main import app
try:
    app(sys.argv[1:] + ["--help"], prog_name="stratagem")
except SystemExit:
    pass
mods = list(sys.modules)
print(json.dumps({{"stratagem": sum(m.split(".")[0] == "stratagem" for m in mods),
                  "heavy": sorted({{m.split(".")[0] for m in mods}} & set({HEAVY!r}))}}))
"""


def measure(src: Path, args: list[str], repeats: int) -> tuple[float, dict]:
    """Median seconds of ``repeats`` fresh processes running ``stratagem ARGS --help``."""
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    seconds, info = [], {}
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env
        )
        seconds.append(time.perf_counter() - start)
        info = json.loads(out.stdout.splitlines()[-1])
    return statistics.median(seconds), info


def main() -> None:
    """Prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit")
    parser.add_argument("--repeats", type=int, default=7)
    cli = parser.parse_args()
    here = Path(__file__).resolve().parents[1] / "src"
    print(f"median of {cli.repeats} fresh processes, seconds (stratagem modules; heavy libraries)")
    for args in COMMANDS:
        line = "stratagem " + " ".join([*args, "--help"])
        now, info = measure(here, args, cli.repeats)
        cells = [
            f"{line:32}",
            f"now {now:6.3f} ({info['stratagem']}; {','.join(info['heavy']) or '-'})",
        ]
        if cli.baseline:
            then, old = measure(cli.baseline / "src", args, cli.repeats)
            cells.append(
                f"before {then:6.3f} ({old['stratagem']}; {','.join(old['heavy']) or '-'})"
            )
            cells.append(f"{then / now:5.1f}x faster")
        print("  ".join(cells))


if __name__ == "__main__":
    main()
