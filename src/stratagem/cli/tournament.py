"""``stratagem tournament``: a resumable round robin, every agent vs every agent in both seats."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from stratagem.agents.spec import LLMOptions, make_agent
from stratagem.cli.progress import progress_bar
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.tournament import round_robin

console = Console()


def tournament_command(
    game: str = typer.Option(..., "--game", "-g", help="Game id."),
    agents: str = typer.Option(
        ..., "--agents", "-a", help="Comma-separated agents: strategy names, hf, openai:MODEL."
    ),
    gft: int = typer.Option(400, help="Bargaining: scenarios with gains from trade per pairing."),
    ngft: int = typer.Option(200, help="Bargaining: scenarios without gains from trade."),
    episodes: int = typer.Option(20, "--episodes", "-n", help="Other games: episodes per pairing."),
    catalog: Path = typer.Option(
        None, help="Bargaining: a CraigslistBargains JSON file [the shipped catalog]."
    ),
    split_name: str = typer.Option(
        "test", "--split", help="Catalog split: train, validation, test."
    ),
    seed: int = typer.Option(42, "--seed", "-s"),
    out: Path = typer.Option(None, "--out", "-o", help="Run folder [runs/tournament-<game>]."),
    max_new_tokens: int = typer.Option(256, help="LLM agents: tokens per turn."),
    base_url: str = typer.Option(None, help="Endpoint for openai:MODEL agents."),
    strategy_guide: bool = typer.Option(
        True,
        "--strategy-guide/--no-strategy-guide",
        help="Bargaining: include the negotiation tips.",
    ),
) -> None:
    """Every agent against every agent in both roles (itself included) on the same scenarios."""
    the_game = get_game(game)
    names = [a.strip() for a in agents.split(",") if a.strip()]
    if len(set(names)) != len(names) or not names:
        raise ConfigError("--agents needs distinct, comma-separated names")
    scenarios = None
    count = episodes
    extra: dict = {"agent_specs": names}
    if game == "bargaining":
        from stratagem.games.bargaining.catalog import (
            builtin_catalog,
            load_craigslist,
            split,
        )
        from stratagem.games.bargaining.catalog import (
            scenarios as make_scenarios,
        )

        items = load_craigslist(catalog) if catalog else builtin_catalog()
        parts = split(items, seed)
        if split_name not in parts:
            raise ConfigError(f"unknown split {split_name!r}; choose train, validation or test")
        scenarios = make_scenarios(parts[split_name], gft, ngft, seed)
        count = len(scenarios)
        extra["catalog"] = str(catalog) if catalog else "builtin"
        the_game.strategy_guide = strategy_guide
        extra["strategy_guide"] = strategy_guide
    options = LLMOptions(max_new_tokens=max_new_tokens, base_url=base_url)
    extra["llm"] = options.fingerprint()
    built = {}
    for name in names:
        spec = name if ":" in name or name in ("hf",) else f"strategy:{name}"
        built[re.sub(r"[|]", "_", name)] = make_agent(spec, the_game, options)
    folder = out or Path("runs") / f"tournament-{game}"
    total = len(built) ** 2 * count
    with progress_bar(console) as progress:
        task = progress.add_task(f"{game} round robin", total=total)
        result = round_robin(
            the_game,
            built,
            folder,
            count=count,
            seed=seed,
            scenarios=scenarios,
            fingerprint_extra=extra,
            on_episode=lambda _: progress.advance(task),
        )
    _print_summary(result.summary, game)
    console.print(f"{result.episodes} episodes · errors: {result.errors} · run folder: {folder}")


def _print_summary(summary, game: str) -> None:
    if game != "bargaining":
        console.print(summary.to_string(index=False))
        return
    keep = ["deal", "surplus_share", "violation", "utility", "rounds"]
    table = Table(title="Bargaining round robin (mean ± stderr)")
    for col in ("agent", "role", "regime", *keep):
        table.add_column(col, justify="right" if col in keep else "left")
    wide = summary[summary.metric.isin(keep)]
    for (agent, role, regime), g in wide.groupby(["agent", "role", "regime"], sort=True):
        cells = {
            r.metric: ("" if r.n == 0 else f"{r.value:.3f} ± {r.stderr:.3f}")
            for r in g.itertuples()
        }
        table.add_row(agent, role, regime, *(cells.get(k, "") for k in keep))
    console.print(table)
