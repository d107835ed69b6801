"""The shape of the tree, as numbers: ``python tests/layout_report.py [--baseline DIR]``.

Counts what a newcomer meets: lines in the package and outside it, top-level commands and
``gen-sft`` options, prefix groups (``x.py`` beside ``x_*.py``), modules outside ``cli/`` that
define a command, pairs of top-level packages that import each other, functions over 60 lines,
functions of McCabe complexity over 10, README lines and the longest Markdown table cell. With
``--baseline DIR`` (a checkout of another commit, e.g. ``git worktree add /tmp/old a52eee7``)
both trees are measured side by side. The same rules, as tests, are in ``tests/test_layers.py``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
COUNT_COMMANDS = """
import json, sys, typer
from stratagem.cli.main import app
group = typer.main.get_command(app)
names = group.list_commands(None)
gen_sft = group.get_command(None, "gen-sft")
print(json.dumps([len(names), sum(len(p.opts) > 0 for p in gen_sft.params)]))
"""


def python_lines(folder: Path) -> int:
    return (
        sum(len(p.read_text().splitlines()) for p in folder.rglob("*.py")) if folder.exists() else 0
    )


def is_reexport(path: Path) -> bool:
    return path.read_text().lstrip('"').startswith("Kept for one release")


def prefix_groups(package: Path) -> int:
    found = 0
    for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        names = {p.stem for p in folder.glob("*.py") if not is_reexport(p)}
        names |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        found += sum(any(m.startswith(n + "_") for m in names) for n in names)
    return found


def commands_outside_cli(package: Path) -> int:
    found = 0
    for path in package.rglob("*.py"):
        if "cli" in path.relative_to(package).parts:
            continue
        tree = ast.parse(path.read_text())
        found += any(
            isinstance(n, ast.FunctionDef) and n.name.endswith("_command") for n in ast.walk(tree)
        )
    return found


def two_way_pairs(package: Path) -> int:
    """Pairs of top-level sub-packages (or core modules) that import each other."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in package.rglob("*.py"):
        source = path.relative_to(package).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "stratagem" and len(parts) > 1 and parts[1] != source:
                    edges[source].add(parts[1])
    return sum(1 for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))


def functions_over(package: Path, lines: int) -> int:
    count = 0
    for path in package.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                count += n.end_lineno - n.lineno + 1 > lines  # type: ignore[operator]
    return count


def complex_functions(package: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", str(package), "--select", "C901", "--config",
         "lint.mccabe.max-complexity=10", "--output-format", "concise", "--no-cache"],
        capture_output=True, text=True,
    )  # fmt: skip
    return sum(": C901 " in line for line in out.stdout.splitlines())


def longest_cell(root: Path) -> int:
    files = [root / "README.md", *(root / "docs").rglob("*.md")]
    cells = [
        len(cell.strip())
        for f in files
        if f.exists()
        for line in f.read_text().splitlines()
        if line.lstrip().startswith("|")
        for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))
    ]
    return max(cells, default=0)


def measure(root: Path) -> dict[str, int]:
    """Every number of the report for the tree at ``root``."""
    package = root / "src" / "stratagem"
    env = {"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", COUNT_COMMANDS], capture_output=True, text=True, env=env
    )
    commands, gen_sft = json.loads(out.stdout.splitlines()[-1])
    return {
        "src/ lines": python_lines(root / "src"),
        "experiments/ lines": python_lines(root / "experiments"),
        "top-level commands": commands,
        "gen-sft options": gen_sft,
        "prefix groups": prefix_groups(package),
        "modules outside cli/ defining a command": commands_outside_cli(package),
        "packages importing each other (pairs)": two_way_pairs(package),
        "functions over 60 lines": functions_over(package, 60),
        "functions of McCabe complexity over 10": complex_functions(package),
        "README lines": len((root / "README.md").read_text().splitlines()),
        "longest Markdown table cell (characters)": longest_cell(root),
    }


def main() -> None:
    """Prints the report, side by side with ``--baseline`` when given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit")
    cli = parser.parse_args()
    now = measure(HERE)
    before = measure(cli.baseline) if cli.baseline else None
    for key, value in now.items():
        line = f"{key:44} {value:>7}"
        if before is not None:
            line = f"{key:44} {before[key]:>7} → {value:>7}"
        print(line)


if __name__ == "__main__":
    main()
