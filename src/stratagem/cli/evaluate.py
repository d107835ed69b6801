"""``stratagem eval``: SEPO evaluation of one agent against a game's pools."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from stratagem.agents.settings import AgentSettings
from stratagem.cli.options import GameGroup, RunGroup
from stratagem.errors import ConfigError
from stratagem.settings import Positive, RaySettings, SizeSettings, opt

if TYPE_CHECKING:
    from stratagem.agent import Agent
    from stratagem.evaluation.pools import Evaluation
    from stratagem.game import Game
    from stratagem.runs import Player

console = Console()


@dataclasses.dataclass(kw_only=True)
class EvalConfig(RunGroup, SizeSettings, RaySettings, AgentSettings, GameGroup):
    """Evaluate an agent against every pool of a game.

    Prints the SEPO metrics with their standard errors (and, for a game with a solver tree, the
    exact exploitability) and writes a resumable run folder."""

    episodes: Positive = opt(20, "-n")
    """Episodes per opponent."""
    normalise: bool = opt(False, negative="--raw")
    """Scale payoffs by 3 / the game's reference payoff."""
    max_error_rate: float = 0.0
    """Share of errored episodes tolerated before the exit code says failure."""
    new_run: bool = False
    """Start a fresh folder, never resume."""


def eval_command(cfg: EvalConfig) -> None:
    """Evaluate an agent against every pool of a game."""
    from stratagem.agents.spec import make_agent
    from stratagem.cli.launch import check_size
    from stratagem.evaluation.pools import count_episodes
    from stratagem.games import get_game
    from stratagem.report.console import print_evaluation
    from stratagem.runs import fresh_folder

    target = cfg.ray_target()
    _refuse_llm_settings(cfg)
    game = get_game(cfg.game, **cfg.params)
    folder = _default_folder(cfg)
    check_size(count_episodes(game, cfg.episodes), folder, yes=cfg.yes)  # before a model
    options = cfg.llm_options(game)
    agent = make_agent(cfg.agent, game, options)
    extra = _fingerprint_extra(cfg, agent, options)
    if cfg.new_run:
        folder = fresh_folder(folder)
    player = None if target is None else _ray_player(cfg, agent, options)
    result = _evaluate_with_progress(cfg, game, agent, folder, extra, player)
    print_evaluation(console, result)
    exit_on_errors(result, cfg.max_error_rate)


def _refuse_llm_settings(cfg: EvalConfig) -> None:
    """Refuses LLM settings given for an agent that is not an LLM."""
    from stratagem.agents.spec import is_llm

    if not is_llm(cfg.agent) and cfg.llm_settings_given():
        names = ", ".join(cfg.llm_settings_given())
        raise ConfigError(f"{names}: for LLM agents (hf, openai:MODEL, vllm) only, not {cfg.agent}")


def _default_folder(cfg: EvalConfig) -> Path:
    """The checked run folder: ``--out``, else runs/GAME/AGENT-sSEED-nEPISODES."""
    from stratagem.runs import check_out_path

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", cfg.agent)
    return check_out_path(
        cfg.run_folder(Path("runs", cfg.game, f"{slug}-s{cfg.seed}-n{cfg.episodes}"))
    )


def _fingerprint_extra(cfg: EvalConfig, agent: Agent, options: Any) -> dict:
    """The run folder's fingerprint extras: the agent spec, and an LLM's options and model id."""
    from stratagem.agents.spec import is_llm

    extra: dict = {"agent_spec": cfg.agent}
    if is_llm(cfg.agent):
        extra["llm"] = options.fingerprint()
        extra["model_id"] = agent.backend.model_id  # type: ignore[attr-defined]
    return extra


def _ray_player(cfg: EvalConfig, agent: Agent, options: Any) -> Player:
    """The Ray player that plays ``agent``'s episodes on the cluster."""
    from stratagem.tournament.ray import RayPlayer

    return RayPlayer({agent.name: cfg.agent}, options=options, **cfg.ray_options())


def _evaluate_with_progress(
    cfg: EvalConfig, game: Game, agent: Agent, folder: Path, extra: dict, player: Player | None
) -> Evaluation:
    """Runs the evaluation into ``folder`` behind a progress bar of its episodes."""
    from stratagem.cli.progress import progress_bar
    from stratagem.evaluation.pools import count_episodes, evaluate

    with progress_bar(console) as progress:
        task = progress.add_task(
            f"{cfg.game} · {agent.name}", total=count_episodes(game, cfg.episodes)
        )
        return evaluate(
            game,
            agent,
            episodes=cfg.episodes,
            seed=cfg.seed,
            normalise=cfg.normalise,
            out=folder,
            fingerprint_extra=extra,
            on_episode=lambda _: progress.advance(task),
            player=player,
        )


def exit_on_errors(result: Evaluation, max_error_rate: float) -> None:
    """A9: a run with errored episodes says so and exits 1 (beyond ``max_error_rate``)."""
    if not result.errors:
        return
    attempted = result.episodes
    first = " ".join((result.first_error or "").split())
    line = (
        f"coverage: {attempted - result.errors} of {attempted} episodes complete; "
        f"{result.errors} failed (first: {first}). Rerun the same command to retry them."
    )
    if result.errors / max(attempted, 1) > max_error_rate:
        Console(stderr=True, soft_wrap=True).print(line, highlight=False, markup=False)
        raise typer.Exit(1)
    console.print(line, highlight=False, markup=False)
