"""The layers hold: dependencies point one way (DESIGN §1), no import cycles, no trainer imports
another trainer, no command imports another command, and modules stay small.

The import graph is read with ``ast`` from the source, so lazy imports inside functions and
``TYPE_CHECKING`` imports count: a dependency is a dependency wherever it is written.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "stratagem"

CORE = {
    "errors", "registry", "seeding", "settings", "game", "parsing", "agent", "episode", "play",
    "pools", "trace", "trace_schema", "runs", "launch", "tree", "cluster",
}  # fmt: skip
# the layers, bottom up; a module may import its own layer and the ones below
LAYERS: list[set[str]] = [
    CORE,
    {"games", "strategies", "agents", "backends"},
    {"metrics", "solvers"},
    {"tournament", "evaluation", "training", "report", "distributed"},
    {"web", "cli"},
]
TRAINERS = {f"stratagem.training.{m}" for m in ("sft", "sepo", "selfplay", "bargaining")}
CLI_SHARED = {
    "stratagem.cli",
    "stratagem.cli.main",
    "stratagem.cli.options",
    "stratagem.cli.progress",
}
MAX_LINES, SOFT_LINES, OVER_SOFT = 500, 400, 3  # hard cap; at most OVER_SOFT modules above SOFT


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the stratagem modules it imports (submodules resolved where they exist)."""
    modules = {module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                targets = targets or [base]
            for target in targets:
                while target and target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target.startswith("stratagem") and target != name:
                    graph[name].add(target)
    return graph


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package root re-exports lazily; it is nobody's dependency
    for level, names in enumerate(LAYERS):
        if parts[1] in names:
            return level
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in tests/test_layers.py")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in graph.items():
        low = layer_of(source)
        for target in targets:
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                bad.append(f"{source} -> {target}")
    return sorted(bad)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_dependencies_point_one_way(graph):
    assert upward_imports(graph) == []


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def trainer_of(module: str) -> str | None:
    """The trainer package ``module`` belongs to, if any."""
    return next((t for t in TRAINERS if module == t or module.startswith(t + ".")), None)


def test_no_trainer_imports_another_trainer(graph):
    bad = [
        f"{s} -> {t}"
        for s, ts in graph.items()
        for t in ts
        if trainer_of(s) and trainer_of(t) and trainer_of(s) != trainer_of(t)
    ]
    assert bad == []


def test_no_command_imports_another_command(graph):
    def is_command(m: str) -> bool:
        return m.startswith("stratagem.cli.") and m not in CLI_SHARED

    bad = [f"{s} -> {t}" for s, ts in graph.items() if is_command(s) for t in ts if is_command(t)]
    assert bad == []


def test_modules_stay_small():
    sizes = {module_name(p): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}
    over = {m: n for m, n in sizes.items() if n > SOFT_LINES}
    assert len(over) <= OVER_SOFT, over


def test_the_cli_stays_thin():
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / "cli").glob("*.py"))
    assert lines <= 1400


def test_the_guard_sees_a_deliberate_upward_import(tmp_path):
    """The checks above can fail: a core module importing the CLI, a game importing a solver
    and two modules importing each other are all caught."""
    pkg = tmp_path / "stratagem"
    (pkg / "games").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "solvers").mkdir()
    for folder in (pkg, pkg / "games", pkg / "cli", pkg / "solvers"):
        (folder / "__init__.py").write_text("")
    (pkg / "episode.py").write_text("def f():\n    from stratagem.cli import main\n")
    (pkg / "cli" / "main.py").write_text("")
    (pkg / "games" / "kuhn.py").write_text("from stratagem.solvers.cfr import solve\n")
    (pkg / "solvers" / "cfr.py").write_text("from stratagem.solvers import tree\n")
    (pkg / "solvers" / "tree.py").write_text("from . import cfr\n")
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        g = import_graph(pkg)
    finally:
        SRC = saved
    assert upward_imports(g) == [
        "stratagem.episode -> stratagem.cli.main",
        "stratagem.games.kuhn -> stratagem.solvers.cfr",
    ]
    assert cycles(g) == [["stratagem.solvers.cfr", "stratagem.solvers.tree"]]
