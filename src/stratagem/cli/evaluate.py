"""``stratagem eval``: SEPO evaluation of one agent against a game's pools."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import typer
from rich.console import Console

from stratagem.agents.settings import AgentSettings
from stratagem.cli.options import GameGroup, RunGroup
from stratagem.errors import ConfigError
from stratagem.evaluation.pools import Evaluation
from stratagem.settings import Positive, RaySettings, SizeSettings, opt

console = Console()


@dataclasses.dataclass(kw_only=True)
class EvalConfig(RunGroup, SizeSettings, RaySettings, AgentSettings, GameGroup):
    """Evaluate an agent against every pool of a game and print the SEPO metrics."""

    episodes: Positive = opt(20, "-n")
    """Episodes per opponent."""
    normalise: bool = opt(False, negative="--raw")
    """Scale payoffs by 3 / the game's reference payoff."""
    max_error_rate: float = 0.0
    """Share of errored episodes tolerated before the exit code says failure."""
    new_run: bool = False
    """Start a fresh folder, never resume."""


def eval_command(cfg: EvalConfig) -> None:
    """Evaluate an agent against every pool of a game and print the SEPO metrics."""
    from stratagem.agents.spec import is_llm, make_agent
    from stratagem.cli.launch import check_size
    from stratagem.cli.progress import progress_bar
    from stratagem.evaluation.pools import count_episodes, evaluate
    from stratagem.games import get_game
    from stratagem.report.console import print_evaluation
    from stratagem.runs import check_out_path, fresh_folder

    target = cfg.ray_target()
    if not is_llm(cfg.agent) and cfg.llm_settings_given():
        names = ", ".join(cfg.llm_settings_given())
        raise ConfigError(f"{names}: for LLM agents (hf, openai:MODEL, vllm) only, not {cfg.agent}")
    game = get_game(cfg.game, **cfg.params)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", cfg.agent)
    folder = check_out_path(
        cfg.run_folder(Path("runs", cfg.game, f"{slug}-s{cfg.seed}-n{cfg.episodes}"))
    )
    check_size(count_episodes(game, cfg.episodes), folder, yes=cfg.yes)  # before a model
    options = cfg.llm_options(game)
    agent = make_agent(cfg.agent, game, options)
    extra: dict = {"agent_spec": cfg.agent}
    if is_llm(cfg.agent):
        extra["llm"] = options.fingerprint()
        extra["model_id"] = agent.backend.model_id  # type: ignore[attr-defined]
    if cfg.new_run:
        folder = fresh_folder(folder)
    player = None
    if target is not None:
        from stratagem.tournament.ray import RayPlayer

        player = RayPlayer({agent.name: cfg.agent}, options=options, **cfg.ray_options())
    with progress_bar(console) as progress:
        task = progress.add_task(
            f"{cfg.game} · {agent.name}", total=count_episodes(game, cfg.episodes)
        )
        result = evaluate(
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
    print_evaluation(console, result)
    exit_on_errors(result, cfg.max_error_rate)


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
