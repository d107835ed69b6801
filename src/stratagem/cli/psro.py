"""``stratagem psro``: PSRO over a game's strategies, with the meta-strategy logged and plotted.

Text games are simulated, solver trees can use the exact oracle, dialogue games run PSRO over
instruction strings (``solvers.psro.setup``). Writes the resolved config, the per-iteration log
(``psro.json``), the final meta-game (``meta_game.csv``) and the meta-strategy plot
(``meta_strategy.png``); dialogue runs add ``proposals.json`` and ``usage.json``. ``psro.json``
names the meta-solver's solution concept and logs each iteration's Nash and CCE gaps on the
meta-game; ``--disagreement`` sets nash-bargaining's disagreement point.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field
from rich.console import Console
from rich.table import Table

from stratagem.cli.options import RunGroup
from stratagem.settings import NonNegative, Positive, opt, resolved
from stratagem.solvers.dialogue.setup import DialogueSettings

if TYPE_CHECKING:
    from stratagem.solvers.psro import Iteration, PSROResult

console = Console()


@dataclasses.dataclass(kw_only=True)
class PSROConfig(RunGroup, DialogueSettings):
    """Grow each seat's population by PSRO best responses.

    Each iteration adds the best response to a meta-solver's meta-strategy over the
    populations."""

    game: str = opt(..., "-g")
    """Game id: a text game, a solver tree (kuhn, leduc) or a dialogue game."""
    params: dict[str, Any] = opt({}, "--param", "-p")
    """Game parameter KEY=VALUE (JSON value) of a text game; repeatable."""
    meta_solver: str = opt("replicator", "-m")
    """The meta-solver (see solvers.matrix.META_SOLVERS)."""
    oracle: Literal["candidates", "exact"] = "candidates"
    """Best of a candidate list, or the exact best response on a solver tree."""
    candidates: list[str] | None = None
    """Candidate strategies (dialogue: instructions) [all of the game's]."""
    initial: list[str] | None = None
    """Both seats' first strategies [the first candidate; dialogue: the domain's set]."""
    propose: NonNegative = 0
    """Dialogue: new instructions the LLM proposes per response."""
    iterations: Positive = opt(20, "-n")
    """PSRO iterations."""
    episodes: Positive = opt(20, "-e")
    """Episodes per meta-game cell of a text game."""
    scenarios: Positive = 3
    """Dialogue: scenarios per cell."""
    tolerance: Annotated[float, Field(ge=0)] = 1e-6
    """Stop when no best response gains more than this."""
    disagreement: list[float] | None = None
    """Nash bargaining's disagreement point, one payoff per seat, e.g. 0,0 [each seat's minimum
    meta-game payoff minus 10% of its payoff range, which rescaling the payoffs cannot change]."""


def psro_command(cfg: PSROConfig) -> None:
    """Grow each seat's population by best responses to a meta-solver's meta-strategy."""
    from stratagem.errors import UnknownNameError
    from stratagem.solvers.games import dialogue_games
    from stratagem.solvers.matrix import META_SOLVERS
    from stratagem.solvers.psro import psro
    from stratagem.solvers.psro.setup import disagreement_point, psro_start

    if cfg.meta_solver not in META_SOLVERS:
        raise UnknownNameError("meta-solver", cfg.meta_solver, META_SOLVERS)
    point = disagreement_point(cfg)
    dialogue = cfg.game in dialogue_games()
    if not dialogue:
        cfg.refuse_dialogue_settings(("propose", "scenarios"))
    meta, oracle, start = psro_start(cfg)
    folder = _write_config(cfg)
    table = _iterations_table(cfg)
    result = psro(
        meta,
        oracle,
        cfg.meta_solver,
        initial=(start, start),
        iterations=cfg.iterations,
        tolerance=cfg.tolerance,
        on_iteration=lambda it: table.add_row(*_iteration_row(it)),
        disagreement=point,
    )
    png = _write_results(cfg, result, folder)
    console.print(table)
    _print_summary(result)
    if dialogue:
        _write_dialogue_usage(oracle, folder)
    console.print(f"wrote {folder / 'psro.json'}, {folder / 'meta_game.csv'} and {png}")


def _write_config(cfg: PSROConfig) -> Path:
    """Creates the run folder and writes the resolved config into it; returns the folder."""
    folder = cfg.run_folder(Path("runs") / f"psro-{cfg.game}-{cfg.meta_solver}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(resolved(cfg), indent=2) + "\n")
    return folder


def _iterations_table(cfg: PSROConfig) -> Table:
    """The empty table of PSRO iterations, one row added per iteration."""
    table = Table(title=f"PSRO on {cfg.game} · {cfg.meta_solver} · {cfg.oracle} oracle")
    for column in ("iteration", "population", "meta-strategy (seat 0)", "responses", "gains"):
        table.add_column(column)
    return table


def _iteration_row(it: Iteration) -> list[str]:
    """One iteration's row: its population size, seat 0's top shares, responses and gains."""
    top = sorted(it.meta_strategy[0].items(), key=lambda kv: -kv[1])[:4]
    shares = ", ".join(f"{n} {p:.2f}" for n, p in top if p >= 0.005)
    gains = " / ".join(f"{g:.4f}" for g in it.gains)
    return [str(it.iteration), str(len(it.populations[0])), shares, " / ".join(it.responses), gains]


def _write_results(cfg: PSROConfig, result: PSROResult, folder: Path) -> Path:
    """Writes ``psro.json``, ``meta_game.csv`` and the meta-strategy plot; returns the plot."""
    from stratagem.report.solve import write_meta_game
    from stratagem.solvers.psro import plot_meta_strategies

    (folder / "psro.json").write_text(result.to_json() + "\n")
    write_meta_game(result, folder / "meta_game.csv")
    return plot_meta_strategies(
        result, folder / "meta_strategy.png", f"PSRO on {cfg.game} ({cfg.meta_solver})"
    )


def _print_summary(result: PSROResult) -> None:
    """Prints why PSRO stopped, the meta-strategy values and the final Nash and CCE gaps."""
    values = result.final.values
    console.print(
        f"stopped: {result.stopped} after {len(result.iterations)} iterations; "
        f"meta-strategy values {values[0]:.4f} / {values[1]:.4f}; "
        f"{result.solution_concept}: Nash gap {result.final.nash_gap:.4g}, "
        f"CCE gap {result.final.cce_gap:.4g}"
    )


def _write_dialogue_usage(oracle: Any, folder: Path) -> None:
    """Writes a dialogue run's ``proposals.json`` and ``usage.json`` and prints the usage."""
    usage = oracle.backend.usage
    (folder / "proposals.json").write_text(json.dumps(oracle.proposals, indent=2) + "\n")
    calls = {k: v for k, v in asdict(usage).items() if k != "batches"}
    (folder / "usage.json").write_text(json.dumps(calls, indent=2) + "\n")
    console.print(
        f"model calls {usage.calls}, completions {usage.generated}, cache hits "
        f"{usage.hits}, {usage.seconds:.1f} s in the model"
    )
