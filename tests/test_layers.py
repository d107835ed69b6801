"""The layers hold and the rooms are rooms: dependencies point one way (DESIGN §1), no import
cycles, no trainer imports another, no command imports another command; commands live only in
``cli/`` (each command function short); a prefix group of files is a package; the library never
imports ``experiments``; a module over 400 lines is named below with its reason.

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
    "pools", "trace", "trace_schema", "runs", "tree", "cluster", "lazy",
}  # fmt: skip
# the layers, bottom up; a module may import its own layer and the ones below
LAYERS: list[set[str]] = [
    CORE,
    {"games", "strategies", "agents", "backends"},
    {"metrics", "solvers"},
    {"tournament", "evaluation", "training", "report"},
    {"web", "cli"},
]
TRAINERS = {f"stratagem.training.{m}" for m in ("sft", "sepo", "selfplay", "bargaining")}
CLI_SHARED = {
    "stratagem.cli",
    "stratagem.cli.main",
    "stratagem.cli.launch",
    "stratagem.cli.options",
    "stratagem.cli.progress",
}
MAX_LINES, SOFT_LINES = 500, 400  # hard cap; above SOFT_LINES a module is named in LONG_MODULES
LONG_MODULES = {
    "stratagem.training.sft.data": "the SFT data writer: the SEPO datasets and the chats of any "
    "game, their split, card and filters, one pipeline read top to bottom",
    "stratagem.games.kuhn": "Kuhn poker's rule tables and the three things that read them: the "
    "text game, the exact tree and the probe's per-information-set chats, so the probe asks the "
    "game agents play",
    "stratagem.strategies.dond": "Deal or No Deal's rule-based negotiators, one class each, as "
    "every game's strategies module holds its own",
}
CLI_FUNCTION_LINES = 40
KEPT_FOR_ONE_RELEASE = "Kept for one release"  # a re-export at a moved module's old path


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


def module_sizes(root: Path = PACKAGE) -> dict[str, int]:
    return {module_name(p): len(p.read_text().splitlines()) for p in root.rglob("*.py")}


def long_modules(sizes: dict[str, int]) -> dict[str, str]:
    """Modules over the hard cap, over the soft limit without a reason, or named without need."""
    bad = {m: f"{n} lines > {MAX_LINES}" for m, n in sizes.items() if n > MAX_LINES}
    for m, n in sizes.items():
        if SOFT_LINES < n <= MAX_LINES and m not in LONG_MODULES:
            bad[m] = f"{n} lines: name it in LONG_MODULES with its reason, or split it by idea"
    for m in LONG_MODULES:
        if sizes.get(m, 0) <= SOFT_LINES:
            bad[m] = "no longer over the soft limit: take it out of LONG_MODULES"
    return bad


def is_reexport(path: Path) -> bool:
    return path.read_text(encoding="utf-8").lstrip('"').startswith(KEPT_FOR_ONE_RELEASE)


def prefix_groups(root: Path = PACKAGE) -> list[str]:
    """Folders holding ``X.py`` (or package ``X/``) beside ``X_*.py``: a package in disguise."""
    found = []
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        names = {p.stem for p in folder.glob("*.py") if not is_reexport(p)}
        names |= {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        for name in sorted(names):
            members = sorted(m for m in names if m.startswith(name + "_"))
            if members:
                found.append(f"{folder.relative_to(root.parent)}/{name}: {', '.join(members)}")
    return found


def commands_outside_cli(root: Path = PACKAGE) -> list[str]:
    """Modules outside ``cli/`` that define a command: a ``*_command`` function or a typer app."""
    found = []
    for path in root.rglob("*.py"):
        if "cli" in path.relative_to(root).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_command"):
                found.append(f"{module_name(path)}.{node.name}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if node.__class__ is ast.ImportFrom:
                    names = [node.module or ""]
                if any(n == "typer" or n.startswith("typer.") for n in names):
                    found.append(f"{module_name(path)} imports typer")
    return sorted(found)


def long_cli_functions(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in (root / "cli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > CLI_FUNCTION_LINES:
                    found.append(f"{module_name(path)}.{node.name}: {lines} lines")
    return sorted(found)


def experiment_imports(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{module_name(path)} -> {n}" for n in names if n.split(".")[0] == "experiments"
            ]
    return sorted(found)


def test_modules_over_the_soft_limit_are_named_with_their_reason():
    assert long_modules(module_sizes()) == {}


def test_a_prefix_group_of_files_is_a_package():
    assert prefix_groups() == []


def test_commands_live_only_in_the_cli():
    assert commands_outside_cli() == []


def test_every_cli_function_is_short():
    assert long_cli_functions() == []


def test_the_library_never_imports_experiments():
    assert experiment_imports() == []


def test_the_room_guards_see_a_deliberately_broken_tree(tmp_path):
    """Each room rule fails on a toy tree that breaks it."""
    pkg = tmp_path / "stratagem"
    for folder in (pkg, pkg / "cli", pkg / "report", pkg / "training"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (pkg / "training" / "sepo.py").write_text("")
    (pkg / "training" / "sepo_rewards.py").write_text("")
    (pkg / "training" / "old_name.py").write_text('"""Kept for one release: moved."""\n')
    (pkg / "report" / "probe.py").write_text(
        "import typer\n\n\ndef probe_command(cfg):\n    pass\n"
    )
    (pkg / "report" / "uses.py").write_text("def f():\n    from experiments.drills import drills\n")
    body = "\n".join(["    x = 1"] * CLI_FUNCTION_LINES)
    (pkg / "cli" / "long.py").write_text(f"def long_command(cfg):\n{body}\n")
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        assert prefix_groups(pkg) == ["stratagem/training/sepo: sepo_rewards"]
        assert commands_outside_cli(pkg) == [
            "stratagem.report.probe imports typer",
            "stratagem.report.probe.probe_command",
        ]
        assert long_cli_functions(pkg) == [
            f"stratagem.cli.long.long_command: {CLI_FUNCTION_LINES + 1} lines"
        ]
        assert experiment_imports(pkg) == ["stratagem.report.uses -> experiments.drills"]
        sizes = {"stratagem.a": MAX_LINES + 1, "stratagem.b": SOFT_LINES + 1, "stratagem.c": 10}
        assert set(long_modules(sizes)) == {"stratagem.a", "stratagem.b", *LONG_MODULES}
    finally:
        SRC = saved


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
