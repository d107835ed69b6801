"""SEPO evaluation: one agent against every pool of a game, metrics from the traces (SPEC §3).

Every opponent plays the same ``episodes`` seeds (common random numbers: the same cards and values
for every opponent), with the evaluated agent in seat 0. All episodes run through one ``play`` call,
so an LLM agent sees one batch per tick across every opponent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from stratagem.agent import Agent
from stratagem.episode import EpisodeSpec
from stratagem.game import Game, HasMetrics, HasSolverTree
from stratagem.metrics.estimate import Estimate
from stratagem.metrics.kuhn import policy_of
from stratagem.metrics.sepo import SEPOGame, as_sepo_game, sepo_metrics
from stratagem.play import play
from stratagem.pools import Pools
from stratagem.runs import RunFolder
from stratagem.seeding import derive
from stratagem.solvers.best_response import exploitability
from stratagem.strategies import get_pools, get_strategy
from stratagem.trace import Trace, read_traces

POLICY = "policy.json"  # the agent's tabular policy, for games with a solver tree


@dataclass
class Evaluation:
    """The result of ``evaluate``: metrics by name, the traces, and (for games with a solver tree)
    the agent's exact exploitability and tabular policy."""

    game: str
    agent: str
    metrics: dict[str, Estimate]
    traces: list[Trace] = field(repr=False)
    exact_exploitability: float | None = None  # games with a solver tree (Kuhn)
    policy: dict[str, dict[str, float]] | None = None  # the agent's policy per information set
    normalised: bool = False
    errors: int = 0
    out: Path | None = None


def episode_seed(seed: int, game: str, index: int) -> int:
    """Returns the seed of the ``index``-th episode of every opponent (common random numbers)."""
    return derive(seed, "eval", game, index)


def sepo_episodes(
    game: Game, agent: Agent, *, episodes: int, seed: int, pools: Pools | None = None
) -> Iterator[EpisodeSpec]:
    """Every (pool, opponent, episode index) of a SEPO evaluation, agent in seat 0."""
    pools = pools or get_pools(game.name)
    for pool, members in pools.items():
        for name in members:
            opponent = get_strategy(game.name, name)
            for i in range(episodes):
                yield EpisodeSpec(
                    episode_id=f"{pool}/{name}/{i:04d}",
                    seed=episode_seed(seed, game.name, i),
                    agents=(agent, opponent),
                    meta={"pool": pool, "opponent": name, "seat": 0, "index": i},
                )


def count_episodes(game: Game, episodes: int) -> int:
    """Returns how many episodes an evaluation with ``episodes`` per opponent plays."""
    return episodes * sum(len(m) for _, m in get_pools(game.name).items())


def evaluate(
    game: Game,
    agent: Agent,
    *,
    episodes: int = 20,
    seed: int = 0,
    normalise: bool = False,
    out: str | Path | None = None,
    fingerprint_extra: dict | None = None,
    max_live: int = 256,
    on_episode: Callable[[Trace], None] | None = None,
) -> Evaluation:
    """Evaluate `agent` on `game` against all pools; with `out`, write a resumable run folder.

    Metrics are SEPO's for a ``SEPOGame``, else the game's own (``HasMetrics``). Raises
    ``ConfigError`` for a game with neither (use a tournament for those).
    """
    from stratagem.report.tables import write_metrics

    if not isinstance(game, HasMetrics):
        as_sepo_game(game)  # a clear error for a game with no metrics to evaluate
    specs = sepo_episodes(game, agent, episodes=episodes, seed=seed)
    if out is None:
        traces = list(play(game, specs, max_live=max_live, on_finish=on_episode))
        return _result(game, agent, traces, normalise, None)
    fingerprint = {
        "job": "eval",
        "game": game.name,
        "game_version": game.version,
        "game_params": dict(game.params),
        "agent": agent.name,
        "episodes": episodes,
        "seed": seed,
        "normalise": normalise,
        "pools": {p: list(m) for p, m in get_pools(game.name).items()},
        **(fingerprint_extra or {}),
    }
    with RunFolder(out, fingerprint, runtime={"max_live": max_live}) as run:
        errors = run.play(game, specs, max_live=max_live, on_episode=on_episode)
        traces = read_traces(run.traces_path)
        result = _result(game, agent, traces, normalise, run.path)
        result.errors = errors
        if result.policy is not None:
            (run.path / POLICY).write_text(json.dumps(result.policy, indent=1, sort_keys=True))
        write_metrics(run.path, result.metrics, result.exact_exploitability, normalise)
        run.finish(run_status(len(traces), errors), episodes=len(traces), errors=errors)
    return result


def run_status(episodes: int, errors: int) -> str:
    """Returns ``complete`` (no errors), ``error`` (nothing completed) or ``partial``."""
    if not errors:
        return "complete"
    return "error" if errors >= episodes else "partial"


def _result(
    game: Game, agent: Agent, traces: list[Trace], normalise: bool, out: Path | None
) -> Evaluation:
    if isinstance(game, SEPOGame):
        metrics = sepo_metrics(traces, game, normalise=normalise)
    else:
        metrics = game.metrics(traces)  # type: ignore[union-attr] (checked in evaluate)
    if not isinstance(game, HasSolverTree):
        return Evaluation(game.name, agent.name, metrics, traces, normalised=normalise, out=out)
    policy = policy_of(agent, game)
    return Evaluation(
        game.name,
        agent.name,
        metrics,
        traces,
        exploitability(game.game_tree(), policy),
        policy,
        normalise,
        out=out,
    )
