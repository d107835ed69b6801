"""``stratagem solve``: CFR or CFR+ on a solver game's tree (Kuhn, Leduc poker) or on the
LLM-expanded trees of a dialogue game (meeting, fruit, debate; seed 003).

Poker writes the config, the average policy (``policy.json``), the exploitability curve
(``curve.csv``, ``exploitability.png``) and ``summary.json`` with the game value. A dialogue game
expands one tree per scenario (one batched model call per depth, through the response cache),
solves each and writes ``expansion.json``, ``dialogues.jsonl``, ``policy.json``, ``metrics.csv``,
``summary.json``, ``table.md`` (seed 003 Table 1), ``metrics.png``, ``exploitability.png``; with
``--steering`` / ``--judge`` the steering and judge accuracy tables. A scenario with a dialogue
without a payoff (failed generation, unparsed judge answer) is not solved: exit 1 naming it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.table import Table

from stratagem.cli.options import RunGroup
from stratagem.settings import NonNegative, Positive, opt, resolved
from stratagem.solvers.dialogue.setup import DialogueSettings

if TYPE_CHECKING:
    from stratagem.solvers.dialogue import DialogueTree
    from stratagem.solvers.dialogue.expansion import ExpansionStats

console = Console()


@dataclasses.dataclass(kw_only=True)
class SolveConfig(RunGroup, DialogueSettings):
    """Solve a poker game or a dialogue game with CFR.

    A poker game with CFR or CFR+ (policy, value, exploitability curve), or a dialogue game's
    LLM-expanded trees (CFR policy, CFR gain, NashConv, tree sizes and model calls)."""

    game: str = opt(..., "-g")
    """A solver game: kuhn, leduc, or a dialogue game: meeting, fruit, debate."""
    algorithm: Literal["cfr", "cfr+"] = "cfr+"
    """The solver."""
    iterations: Positive = opt(1000, "-n")
    """Solver iterations."""
    points: Positive = 60
    """Checkpoints on the exploitability curve."""
    scenarios: Positive = 3
    """Dialogue: scenarios to solve."""
    steering: NonNegative = 0
    """Dialogue: classify up to N messages per instruction (0: skip)."""
    judge: NonNegative = 0
    """Dialogue: judge N templated dialogues per outcome type (0: skip)."""


def solve_command(cfg: SolveConfig) -> None:
    """Solve a poker game or a dialogue game's LLM-expanded trees (see ``SolveConfig``)."""
    from stratagem.solvers.games import solver_game

    kind = solver_game(cfg.game).kind
    folder = cfg.run_folder(Path("runs") / f"solve-{cfg.game}-{cfg.algorithm}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(resolved(cfg), indent=2) + "\n")
    if kind == "dialogue":
        solve_dialogue(cfg, folder)
    else:
        cfg.refuse_dialogue_settings(("steering", "judge", "scenarios"))
        solve_tree(cfg, folder)


def solve_tree(cfg: SolveConfig, folder: Path) -> None:
    """CFR / CFR+ on an eager tree: policy, curve, summary, plot and a table with the published
    game value where one exists."""
    from stratagem.report.solver_plots import plot_curve
    from stratagem.solvers.cfr import solve
    from stratagem.solvers.games import solver_game

    game = solver_game(cfg.game)
    solution = solve(game.game_tree(), cfg.algorithm, cfg.iterations, points=cfg.points)
    (folder / "policy.json").write_text(json.dumps(solution.policy, indent=2, sort_keys=True))
    (folder / "curve.csv").write_text(
        "iteration,exploitability\n" + "".join(f"{i},{e!r}\n" for i, e in solution.curve)
    )
    summary = {"game": cfg.game, "algorithm": cfg.algorithm, "iterations": cfg.iterations}
    summary |= {"value": list(solution.value), "exploitability": solution.exploitability}
    (folder / "summary.json").write_text(
        json.dumps(summary | {"seconds": solution.seconds}, indent=2) + "\n"
    )
    png = plot_curve(solution.curve, folder / "exploitability.png", f"{cfg.game} · {cfg.algorithm}")
    table = Table(title=f"{cfg.algorithm} on {cfg.game}, {cfg.iterations} iterations")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("game value (player 0)", f"{solution.value[0]:.6f}")
    if game.value is not None:
        table.add_row(f"published value ({game.value[1]})", f"{game.value[0]:.6f}")
    table.add_row("exploitability (NashConv / 2)", f"{solution.exploitability:.3e}")
    table.add_row("seconds iterating", f"{solution.seconds:.3f}")
    console.print(table)
    console.print(f"wrote {folder / 'policy.json'}, {folder / 'curve.csv'} and {png}")


def solve_dialogue(cfg: SolveConfig, folder: Path) -> None:
    """Expands, solves and reports a dialogue game's trees (see the module docstring)."""
    from stratagem.report import solve as report
    from stratagem.solvers.dialogue import DialogueTree, UnsolvedScenarios, expand, setup
    from stratagem.solvers.dialogue.expansion import unsolved_message
    from stratagem.solvers.dialogue.metrics import summarize

    domain, scenarios, tree_args = setup.dialogue_setup(cfg, cfg.game, cfg.scenarios)
    backend = setup.cached_backend(cfg)
    trees = [DialogueTree(domain, s, backend, **tree_args) for s in scenarios]
    console.print(
        f"expanding {len(trees)} {cfg.game} trees: {cfg.replies} replies, {cfg.seeds} seeds, "
        f"instructions {', '.join(domain.instructions)} ({backend.model_id})"
    )
    stats = expand(trees)
    _write_expansion(folder, stats, trees)
    solved = setup.solve_trees(trees, cfg.algorithm, cfg.iterations, cfg.points)
    results, failed = solved["results"], solved["failed"]
    (folder / "policy.json").write_text(json.dumps(solved["policies"], indent=2) + "\n")
    report.write_metrics_csv(folder, results)
    summary = summarize(results) if results else {}
    meta = _dialogue_summary(cfg, backend.model_id, domain, len(trees), stats, solved, summary)
    (folder / "summary.json").write_text(json.dumps(meta, indent=2) + "\n")
    (folder / "table.md").write_text(
        report.table_md(cfg, backend.model_id, stats, summary, results)
    )
    if results:
        _plot_dialogue(cfg, folder, results, solved["curves"])
    report.print_dialogue_tables(console, cfg, stats, results, summary, failed)
    if cfg.steering:
        report.write_steering(console, cfg, domain, trees, backend, folder)
    if cfg.judge:
        report.write_judge(console, cfg, domain, backend, folder)
    console.print(f"wrote {folder}")
    if failed:  # after writing what did solve: the run is still a failure (exit 1)
        raise UnsolvedScenarios(unsolved_message(solved["failures"], len(trees)))


def _write_expansion(folder: Path, stats: ExpansionStats, trees: list[DialogueTree]) -> None:
    """Writes the expansion's statistics (``expansion.json``) and every tree's dialogues
    (``dialogues.jsonl``)."""
    (folder / "expansion.json").write_text(json.dumps(asdict(stats), indent=2) + "\n")
    with (folder / "dialogues.jsonl").open("w") as f:
        f.writelines(json.dumps(row) + "\n" for tree in trees for row in tree.dialogues())


def _dialogue_summary(
    cfg: SolveConfig,
    model_id: str,
    domain: Any,
    scenarios: int,
    stats: ExpansionStats,
    solved: dict[str, Any],
    summary: dict[str, Any],
) -> dict[str, Any]:
    """The content of a dialogue run's ``summary.json``: what was solved and what failed, the
    metric summaries, the expansion's statistics and the solve time."""
    meta: dict[str, Any] = {"game": cfg.game, "model": model_id}
    meta["instructions"] = list(domain.instructions)
    meta |= {"scenarios": scenarios, "solved": len(solved["results"]), "failed": solved["failed"]}
    meta |= {"failures": solved["failures"]}
    meta |= {k: asdict(v) for k, v in summary.items()}
    meta["expansion"] = {k: v for k, v in asdict(stats).items() if k != "batches"}
    meta["solve_seconds"] = solved["seconds"]
    return meta


def _plot_dialogue(cfg: SolveConfig, folder: Path, results: list, curves: dict) -> None:
    """Plots the solved trees' metrics (``metrics.png``) and exploitability curves
    (``exploitability.png``)."""
    from stratagem.report.solver_plots import plot_curves, plot_metrics

    plot_metrics(results, folder / "metrics.png", f"{cfg.game}: CFR Gain and NashConv")
    plot_curves(curves, folder / "exploitability.png", f"{cfg.game} · {cfg.algorithm}")
