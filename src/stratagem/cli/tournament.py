"""``stratagem tournament``: a resumable round robin, every agent vs every agent in both seats."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.console import Console

from stratagem.agent import Agent
from stratagem.agents.spec import LLMOptions, make_agent
from stratagem.cli.config import parse_params
from stratagem.cli.evaluate import RAY_ADDRESS_OPTION, RAY_OPTION, WORKERS_OPTION, ray_target
from stratagem.cli.progress import progress_bar
from stratagem.errors import ConfigError
from stratagem.game import Game, HasRegimeScenarios
from stratagem.games import get_game
from stratagem.report.registry import tournament_report

console = Console()


def tournament_command(
    game: str = typer.Option(..., "--game", "-g", help="Game id."),
    agents: str = typer.Option(
        ...,
        "--agents",
        "-a",
        help="Comma-separated agents: strategy names, hf, openai:MODEL, vllm.",
    ),
    param: list[str] = typer.Option(
        None, "--param", "-p", help="Game parameter KEY=VALUE (JSON value); repeatable."
    ),
    gft: int = typer.Option(400, help="Bargaining: scenarios with gains from trade per pairing."),
    ngft: int = typer.Option(200, help="Bargaining: scenarios without gains from trade."),
    episodes: int = typer.Option(20, "--episodes", "-n", help="Other games: episodes per pairing."),
    catalog: Path = typer.Option(
        None, help="Bargaining: a CraigslistBargains JSON file [the shipped catalog]."
    ),
    split_name: str = typer.Option(
        "test", "--split", help="Bargaining catalog split: train, validation, test."
    ),
    seed: int = typer.Option(42, "--seed", "-s"),
    out: Path = typer.Option(None, "--out", "-o", help="Run folder [runs/tournament-<game>]."),
    max_new_tokens: int = typer.Option(256, help="LLM agents: tokens per turn."),
    base_url: str = typer.Option(None, help="Endpoint for openai:MODEL agents."),
    strategy_guide: bool = typer.Option(
        None,
        "--strategy-guide/--no-strategy-guide",
        help="Bargaining: include the negotiation tips [on].",
    ),
    ray: bool = RAY_OPTION,
    ray_address: str = RAY_ADDRESS_OPTION,
    workers: int = WORKERS_OPTION,
) -> None:
    """Every agent against every agent in both roles (itself included) on the same scenarios."""
    from stratagem.tournament import round_robin

    target = ray_target(ray, ray_address, workers)
    params = parse_params(param) or {}
    # the bargaining options are game parameters with their own flags
    if catalog is not None:
        params["catalog"] = str(catalog)
    if strategy_guide is not None:
        params["strategy_guide"] = strategy_guide
    if "split" not in params and _takes(game, "split"):
        params["split"] = split_name
        params.setdefault("split_seed", seed)
    the_game = get_game(game, **params)
    names = [a.strip() for a in agents.split(",") if a.strip()]
    if len(set(names)) != len(names) or not names:
        raise ConfigError("--agents needs distinct, comma-separated names")
    if episodes < 1:
        raise ConfigError("--episodes must be at least 1")
    scenarios = None
    count = episodes
    extra: dict = {"agent_specs": names}
    if isinstance(the_game, HasRegimeScenarios):
        if gft < 0 or ngft < 0 or gft + ngft == 0:
            raise ConfigError("--gft and --ngft must be non-negative with at least one scenario")
        scenarios = the_game.tournament_scenarios(gft, ngft, seed)
        count = len(scenarios)
    options = LLMOptions(max_new_tokens=max_new_tokens, base_url=base_url)
    extra["llm"] = options.fingerprint()
    built, specs = _build_agents(names, the_game, options, remote=target is not None)
    player = None
    if target is not None:
        from stratagem.tournament.ray import RayPlayer

        player = RayPlayer(specs, options=options, address=target, workers=workers)
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
            player=player,
        )
    report = tournament_report(the_game.name)
    if report is not None:
        console.print(report.table(result.summary))
    else:
        console.print(result.summary.to_string(index=False))
    console.print(f"{result.episodes} episodes · errors: {result.errors} · run folder: {folder}")


def _build_agents(
    names: list[str], game: Game, options: LLMOptions, *, remote: bool
) -> tuple[dict[str, Agent], dict[str, str]]:
    """Returns the agents by tournament name, and the spec string of each built agent by agent
    name. ``remote`` (a Ray run): model agents are ``RemoteAgent``s, loaded by the workers only.
    """
    built: dict[str, Agent] = {}
    specs: dict[str, str] = {}
    for name in names:
        spec = name if ":" in name or name in ("hf", "vllm") else f"strategy:{name}"
        key = re.sub(r"[|]", "_", name)
        if remote and spec.partition(":")[0] in ("hf", "vllm"):
            from stratagem.tournament.schedule import RemoteAgent

            built[key] = RemoteAgent(spec, key)
        else:
            built[key] = make_agent(spec, game, options)
            specs[built[key].name] = spec
    return built, specs


def _takes(game: str, name: str) -> bool:
    """Whether the game's constructor takes the parameter ``name``."""
    import inspect

    from stratagem.games.registry import GAMES

    return name in inspect.signature(GAMES.get(game).__init__).parameters
