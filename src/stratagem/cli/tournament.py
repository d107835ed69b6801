"""``stratagem tournament``: a resumable round robin, every agent vs every agent in both seats."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from stratagem.agent import Agent
from stratagem.agents.settings import LLMSettings
from stratagem.cli.options import GameGroup, RunGroup
from stratagem.errors import ConfigError
from stratagem.game import Game, HasRegimeScenarios
from stratagem.settings import NonNegative, Positive, RaySettings, SizeSettings, opt

if TYPE_CHECKING:
    from stratagem.runs import Player
    from stratagem.tournament import TournamentResult

console = Console()


@dataclasses.dataclass(kw_only=True)
class TournamentConfig(RunGroup, SizeSettings, RaySettings, LLMSettings, GameGroup):
    """Play every agent against every agent, in both seats.

    Itself included, on the same scenarios; a resumable run folder with per-game tables."""

    agents: list[str] = opt(..., "-a")
    """Agents: strategy names, hf, hf:MODEL, openai:MODEL, vllm; hf@ADAPTER loads its own."""
    episodes: Positive = opt(20, "-n")
    """Episodes per pairing (games without scenario regimes)."""
    gft: NonNegative = 400
    """Scenarios with gains from trade per pairing (bargaining)."""
    ngft: NonNegative = 200
    """Scenarios without gains from trade per pairing (bargaining)."""
    catalog: Path | None = None
    """A CraigslistBargains JSON file [the shipped catalog] (bargaining)."""
    split: str = "test"
    """Catalog split the scenarios come from: train, validation or test (bargaining)."""
    strategy_guide: bool | None = None
    """Include the negotiation tips in the prompts [the game's default: on] (bargaining)."""
    seed: int = opt(42, "-s")
    """Base seed of scenarios and episodes."""


def tournament_command(cfg: TournamentConfig) -> None:
    """Play every agent against every agent, in both seats."""
    from stratagem.cli.launch import check_size
    from stratagem.games import get_game
    from stratagem.report.tournament import print_tournament

    target = cfg.ray_target()
    the_game = get_game(cfg.game, **_params(cfg))
    names = cfg.agents
    if len(set(names)) != len(names) or not names:
        raise ConfigError("--agents needs distinct, comma-separated names")
    folder = cfg.run_folder(Path("runs") / f"tournament-{cfg.game}")
    pairing = cfg.gft + cfg.ngft if isinstance(the_game, HasRegimeScenarios) else cfg.episodes
    check_size(len(names) ** 2 * pairing, folder, yes=cfg.yes)  # before scenarios and models
    scenarios, count = _scenarios(cfg, the_game)
    options = cfg.llm_options(the_game)
    built, specs = _build_agents(names, the_game, options, remote=target is not None)
    player = None
    if target is not None:
        from stratagem.tournament.ray import RayPlayer

        player = RayPlayer(specs, options=options, **cfg.ray_options())
    extra = {"agent_specs": names, "llm": options.fingerprint()}
    result = _play_with_progress(cfg, the_game, built, folder, count, scenarios, extra, player)
    print_tournament(console, the_game, result)
    console.print(f"{result.episodes} episodes · errors: {result.errors} · run folder: {folder}")
    result.check()  # A9: failed episodes -> their coverage line and exit 1, like eval


def _scenarios(cfg: TournamentConfig, game: Game) -> tuple[list | None, int]:
    """The scenarios every pairing plays and their count: ``--gft`` + ``--ngft`` drawn for a game
    with scenario regimes, else no scenarios (None) and ``--episodes`` episodes."""
    if not isinstance(game, HasRegimeScenarios):
        return None, cfg.episodes
    if cfg.gft + cfg.ngft == 0:
        raise ConfigError("--gft and --ngft must be non-negative with at least one scenario")
    scenarios = game.tournament_scenarios(cfg.gft, cfg.ngft, cfg.seed)
    return scenarios, len(scenarios)


def _play_with_progress(
    cfg: TournamentConfig,
    game: Game,
    built: dict[str, Agent],
    folder: Path,
    count: int,
    scenarios: list | None,
    extra: dict,
    player: Player | None,
) -> TournamentResult:
    """Plays the round robin into ``folder`` behind a progress bar of its episodes."""
    from stratagem.cli.progress import progress_bar
    from stratagem.tournament import round_robin

    with progress_bar(console) as progress:
        task = progress.add_task(f"{cfg.game} round robin", total=len(built) ** 2 * count)
        return round_robin(
            game,
            built,
            folder,
            count=count,
            seed=cfg.seed,
            scenarios=scenarios,
            fingerprint_extra=extra,
            on_episode=lambda _: progress.advance(task),
            player=player,
        )


def _params(cfg: TournamentConfig) -> dict:
    """The game parameters: ``--param`` values, plus the scenario options the game takes."""
    from stratagem.games.registry import GAMES

    takes = inspect.signature(GAMES.get(cfg.game).__init__).parameters
    params = dict(cfg.params)
    if cfg.catalog is not None:
        params["catalog"] = str(cfg.catalog)
    if cfg.strategy_guide is not None:
        params["strategy_guide"] = cfg.strategy_guide
    if "split" not in params and "split" in takes:
        params["split"] = cfg.split
        params.setdefault("split_seed", cfg.seed)
    return params


def _build_agents(
    names: list[str], game: Game, options, *, remote: bool
) -> tuple[dict[str, Agent], dict[str, str]]:
    """Returns the agents by tournament name, and the spec string of each built agent by agent
    name. ``remote`` (a Ray run): model agents are ``RemoteAgent``s, loaded by the workers only.
    """
    from stratagem.agents.spec import LOCAL_KINDS, agent_kind, is_llm, make_agent

    built: dict[str, Agent] = {}
    specs: dict[str, str] = {}
    for name in names:
        spec = name if ":" in name or is_llm(name) else f"strategy:{name}"
        key = re.sub(r"[|]", "_", name)
        if remote and agent_kind(spec) in LOCAL_KINDS:
            from stratagem.tournament.schedule import RemoteAgent

            built[key] = RemoteAgent(spec, key)
        else:
            built[key] = make_agent(spec, game, options)
            specs[built[key].name] = spec
    return built, specs
