"""``stratagem psro``: PSRO over a game's strategies, with the meta-strategy logged and plotted.

Text games (``ipd``, ...) are simulated through ``stratagem.play`` and the oracle picks the best
of the candidate strategies; solver games (``kuhn``, ``leduc``) can use the exact oracle on their
tree (``--oracle exact``). Dialogue games (``fruit``, ``meeting``, ``debate``; seed 003) run PSRO
over instruction strings: a cell of the meta-game is the dialogue trees in which each seat always
uses its instruction (``solvers.expand.instruction_payoffs``), both populations start from the
domain's instruction set, and the oracle picks the best of the candidate instructions plus
``--propose`` new ones the LLM suggests per response. Writes the resolved config, the
per-iteration log (``psro.json``), the final meta-game (``meta_game.csv``) and the meta-strategy
plot (``meta_strategy.png``); dialogue runs add ``proposals.json`` and ``usage.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import typer
from pydantic import Field
from rich.console import Console
from rich.table import Table

from stratagem.cli.config import load_config
from stratagem.cli.evaluate import RAY_ADDRESS_OPTION, RAY_OPTION, WORKERS_OPTION, ray_target
from stratagem.cli.solve import DialogueOptions, split_list
from stratagem.errors import ConfigError, did_you_mean
from stratagem.runs import check_out_path
from stratagem.solvers.matrix import META_SOLVERS

console = Console()


class PSROConfig(DialogueOptions):
    """Every ``stratagem psro`` setting (flags override a config file's); the dialogue
    settings apply to dialogue games only."""

    game: str
    meta_solver: str = "replicator"
    oracle: Literal["candidates", "exact"] = "candidates"
    candidates: list[str] | None = Field(None, description="strategies [all of the game's]")
    initial: str | None = Field(None, description="first strategy (dialogue: strategies)")
    propose: int = Field(0, ge=0, description="dialogue: new instructions the LLM proposes")
    iterations: int = Field(20, gt=0)
    episodes: int = Field(20, gt=0, description="episodes per meta-game cell")
    tolerance: float = Field(1e-6, ge=0)
    seed: int = 0
    out: str | None = None


def psro_command(
    game: str = typer.Option(None, "--game", "-g", help="Game id, e.g. ipd (or kuhn, leduc)."),
    meta_solver: str = typer.Option(
        None, "--meta-solver", "-m", help=f"One of {', '.join(META_SOLVERS)} (default: replicator)."
    ),
    oracle: str = typer.Option(
        None,
        help="candidates (best of a strategy list) or exact (solver games) (default: candidates).",
    ),
    candidates: str = typer.Option(
        None, help="Comma-separated candidate strategies (default: all of the game's)."
    ),
    initial: str = typer.Option(
        None, help="Both seats' first strategy (default: the first candidate)."
    ),
    iterations: int = typer.Option(
        None, "--iterations", "-n", help="PSRO iterations (default: 20)."
    ),
    episodes: int = typer.Option(None, "--episodes", "-e", help="Episodes per cell (default: 20)."),
    tolerance: float = typer.Option(None, help="Stop when no gain exceeds this (default: 1e-6)."),
    seed: int = typer.Option(None, "--seed", "-s", help="Base seed (default: 0)."),
    out: str = typer.Option(
        None, "--out", "-o", help="Run folder (default: runs/psro-<game>-<solver>)."
    ),
    agent: str = typer.Option(None, help="Dialogue: hf[:MODEL], openai:MODEL, vllm (default hf)."),
    base_url: str = typer.Option(None, help="Dialogue: the openai endpoint."),
    scenarios: int = typer.Option(None, help="Dialogue: scenarios per cell (default 3)."),
    replies: int = typer.Option(None, help="Dialogue: messages after the opening (default 2)."),
    seeds: int = typer.Option(None, help="Dialogue: LLM seeds per message (default 2)."),
    temperature: float = typer.Option(None, help="Dialogue: sampling temperature (default 0.8)."),
    max_new_tokens: int = typer.Option(None, help="Dialogue: tokens per message (default 48)."),
    cache: str = typer.Option(None, help="Dialogue: response cache file (SQLite)."),
    propose: int = typer.Option(
        None, help="Dialogue: new instructions the LLM proposes per response (default 0)."
    ),
    ray: bool = RAY_OPTION,
    ray_address: str = RAY_ADDRESS_OPTION,
    workers: int = WORKERS_OPTION,
    config: Path = typer.Option(None, "--config", "-c", help="YAML or TOML file of settings."),
) -> None:
    """Grow each seat's population by best responses to a meta-solver's meta-strategy."""
    from stratagem.games.dialogue import DOMAINS
    from stratagem.solvers.psro import MetaGame, plot_meta_strategies, psro

    cfg = load_config(
        PSROConfig,
        config,
        game=game,
        meta_solver=meta_solver,
        oracle=oracle,
        candidates=None if candidates is None else [c.strip() for c in candidates.split(",")],
        initial=initial,
        iterations=iterations,
        episodes=episodes,
        tolerance=tolerance,
        seed=seed,
        out=out,
        agent=agent,
        base_url=base_url,
        scenarios=scenarios,
        replies=replies,
        seeds=seeds,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        cache=cache,
        propose=propose,
        ray=ray_target(ray, ray_address, workers),
        workers=workers,
    )
    if cfg.meta_solver not in META_SOLVERS:
        hint = did_you_mean(cfg.meta_solver, META_SOLVERS)
        choices = ", ".join(META_SOLVERS)
        raise ConfigError(f"unknown meta-solver {cfg.meta_solver!r}{hint}; choose one of {choices}")
    dialogue = cfg.game in DOMAINS
    extra = cfg.model_fields_set & ({*DialogueOptions.model_fields, "propose"} - {"seed"})
    if extra and not dialogue:
        raise ConfigError(
            f"{', '.join(sorted(extra))}: dialogue settings; {cfg.game} is not a dialogue game"
        )
    if dialogue:
        meta, the_oracle, start = _dialogue(cfg)
    elif cfg.oracle == "exact":
        from stratagem.cli.solve import solver_tree
        from stratagem.solvers.psro import TreeGame

        tree_game = TreeGame(solver_tree(cfg.game))
        meta, the_oracle, start = MetaGame(tree_game.evaluate), tree_game, "uniform"
    else:
        meta, the_oracle, start = _simulated(cfg)
    folder = check_out_path(cfg.out or Path("runs") / f"psro-{cfg.game}-{cfg.meta_solver}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(cfg.model_dump_json(indent=2) + "\n")
    table = Table(title=f"PSRO on {cfg.game} · {cfg.meta_solver} · {cfg.oracle} oracle")
    for column in ("iteration", "population", "meta-strategy (seat 0)", "responses", "gains"):
        table.add_column(column)

    def show(it) -> None:
        top = sorted(it.meta_strategy[0].items(), key=lambda kv: -kv[1])[:4]
        table.add_row(
            str(it.iteration),
            str(len(it.populations[0])),
            ", ".join(f"{n} {p:.2f}" for n, p in top if p >= 0.005),
            " / ".join(it.responses),
            " / ".join(f"{g:.4f}" for g in it.gains),
        )

    result = psro(
        meta,
        the_oracle,
        cfg.meta_solver,
        initial=(start, start),
        iterations=cfg.iterations,
        tolerance=cfg.tolerance,
        on_iteration=show,
    )
    (folder / "psro.json").write_text(result.to_json() + "\n")
    _write_meta_game(result, folder / "meta_game.csv")
    png = plot_meta_strategies(
        result, folder / "meta_strategy.png", f"PSRO on {cfg.game} ({cfg.meta_solver})"
    )
    console.print(table)
    final = result.final
    console.print(
        f"stopped: {result.stopped} after {len(result.iterations)} iterations; "
        f"meta-strategy values {final.values[0]:.4f} / {final.values[1]:.4f}"
    )
    if dialogue:
        usage = the_oracle.backend.usage
        (folder / "proposals.json").write_text(json.dumps(the_oracle.proposals, indent=2) + "\n")
        (folder / "usage.json").write_text(
            json.dumps({k: v for k, v in asdict(usage).items() if k != "batches"}, indent=2) + "\n"
        )
        console.print(
            f"model calls {usage.calls}, completions {usage.generated}, cache hits "
            f"{usage.hits}, {usage.seconds:.1f} s in the model"
        )
    console.print(f"wrote {folder / 'psro.json'}, {folder / 'meta_game.csv'} and {png}")


def _dialogue(cfg: PSROConfig):
    """The meta-game over instruction strings, the instruction oracle and the first strategy
    of a dialogue game; both populations start with the initial instructions."""
    from stratagem.cli.solve import cached_backend, dialogue_setup
    from stratagem.games.dialogue import ANY
    from stratagem.solvers.dialogue import InstructionOracle, instruction_meta_game
    from stratagem.solvers.psro import MetaGame

    if cfg.oracle == "exact":
        raise ConfigError("dialogue games use the candidates oracle (no exact best response)")
    domain, scenarios, tree_args = dialogue_setup(cfg, cfg.game, cfg.scenarios)
    initial = split_list(cfg.initial) or list(domain.instructions)
    candidates = cfg.candidates or [*domain.definitions, ANY]
    for name in [*initial, *candidates]:
        domain.check_instruction(name)
    backend = cached_backend(cfg)
    meta = MetaGame(instruction_meta_game(domain, scenarios, backend, **tree_args))
    for name in initial:
        meta.add(0, name)
        meta.add(1, name)
    oracle = InstructionOracle(
        list(candidates), domain, backend, propose=cfg.propose, seed=cfg.seed
    )
    return meta, oracle, initial[0]


def _simulated(cfg: PSROConfig):
    """The meta-game, candidate oracle and first strategy of a simulated (text) game."""
    from stratagem.cli.solve import SOLVER_ONLY
    from stratagem.games import get_game
    from stratagem.solvers.psro import CandidateOracle, MetaGame, simulate
    from stratagem.strategies import get_strategy, strategies

    if cfg.game in SOLVER_ONLY:
        raise ConfigError(f"{cfg.game} is a solver game without strategies: use --oracle exact")
    the_game = get_game(cfg.game)
    known = strategies(cfg.game).names()
    names = cfg.candidates or list(known)
    for name in [*names, *([cfg.initial] if cfg.initial else [])]:
        if name not in known:
            raise ConfigError(
                f"{cfg.game} has no strategy {name!r}{did_you_mean(name, known)}; "
                f"see `stratagem strategies {cfg.game}`"
            )
    evaluate = simulate(
        the_game,
        lambda name: get_strategy(cfg.game, name),
        episodes=cfg.episodes,
        seed=cfg.seed,
    )
    return MetaGame(evaluate), CandidateOracle(tuple(names)), cfg.initial or names[0]


def _write_meta_game(result, path: Path) -> None:
    """The final meta-game as CSV: one line per (seat-0, seat-1) strategy pair."""
    rows, cols = result.populations
    lines = ["seat0,seat1,payoff0,payoff1"]
    for i, a in enumerate(rows):
        for j, b in enumerate(cols):
            lines.append(f"{a},{b},{result.row_payoffs[i][j]!r},{result.col_payoffs[i][j]!r}")
    path.write_text("\n".join(lines) + "\n")
