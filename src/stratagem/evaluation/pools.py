"""SEPO evaluation: one agent against every pool of a game, metrics from the traces (SPEC §3).

Every opponent plays the same ``episodes`` seeds (common random numbers: the same cards and values
for every opponent), with the evaluated agent in seat 0. All episodes run through one ``play`` call,
so an LLM agent sees one batch per tick across every opponent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from stratagem.agent import Agent
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError
from stratagem.game import Game, HasInputFiles, HasSolverTree
from stratagem.metrics.actions import action_rates
from stratagem.metrics.estimate import Estimate
from stratagem.metrics.kuhn import policy_of
from stratagem.metrics.registry import game_metrics
from stratagem.metrics.sepo import SEPOGame, as_sepo_game, sepo_metrics
from stratagem.play import play
from stratagem.pools import Pools
from stratagem.runs import TRACES, Player, RunFolder
from stratagem.seeding import derive
from stratagem.solvers.best_response import exploitability
from stratagem.strategies import get_pools, get_strategy
from stratagem.trace import Trace, iter_traces, read_traces

POLICY = "policy.json"  # the agent's tabular policy, for games with a solver tree


@dataclass
class Evaluation:
    """The result of ``evaluate``: metrics by name, the traces, and (for games with a solver tree)
    the agent's exact exploitability and tabular policy.

    A run-folder evaluation keeps no traces in memory (its metrics stream from the trace file);
    ``traces`` reads them from the folder on first access.
    """

    game: str
    agent: str
    metrics: dict[str, Estimate]
    loaded: list[Trace] | None = field(default=None, repr=False)
    exact_exploitability: float | None = None  # games with a solver tree (Kuhn)
    policy: dict[str, dict[str, float]] | None = None  # the agent's policy per information set
    normalised: bool = False
    errors: int = 0
    out: Path | None = None
    episodes: int = 0  # traces the metrics read (complete and errored)
    first_error: str | None = None

    @property
    def traces(self) -> list[Trace]:
        """Returns every trace of the evaluation (read from the run folder if not in memory)."""
        if self.loaded is None:
            self.loaded = read_traces(self.out / TRACES) if self.out is not None else []
        return self.loaded


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
    player: Player | None = None,
) -> Evaluation:
    """Evaluate `agent` on `game` against all pools; with `out`, write a resumable run folder.

    Metrics are SEPO's for a ``SEPOGame``, else the game's own (``metrics.registry``). ``player``
    plays the episodes in place of the local ``play`` (``tournament.ray.RayPlayer``: on Ray).
    ``normalise`` scales SEPO payoffs by 3 / the game's reference payoff. The run folder keeps a
    copy of every file the game read (``HasInputFiles``). Raises ``ConfigError`` for a game with
    neither kind of metrics (use a tournament for those), and for ``normalise`` on a game whose
    metrics are its own (there is no reference payoff to scale by: it would do nothing).
    """
    from stratagem.report.tables import write_action_rates, write_metrics

    if game_metrics(game.name) is None:
        as_sepo_game(game)  # a clear error for a game with no metrics to evaluate
    if normalise and not isinstance(game, SEPOGame):
        raise ConfigError(
            f"--normalise scales a SEPO game's payoffs by 3 / its reference payoff; {game.name} "
            "has its own metrics and no reference payoff, so it would change nothing: drop it"
        )
    specs = sepo_episodes(game, agent, episodes=episodes, seed=seed)
    if out is None:
        traces = list((player or play)(game, specs, max_live=max_live, on_finish=on_episode))
        result = _result(game, agent, traces, normalise, None)
        result.loaded = traces
        return result
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
    with RunFolder(out, fingerprint, runtime=runtime(max_live, player)) as run:
        if isinstance(game, HasInputFiles):
            run.keep_inputs(game.input_files())
        errors = run.play(game, specs, max_live=max_live, on_episode=on_episode, player=player)
        result = _result(game, agent, iter_traces(run.traces_path), normalise, run.path)
        result.errors = errors
        if result.policy is not None:
            (run.path / POLICY).write_text(json.dumps(result.policy, indent=1, sort_keys=True))
        write_metrics(run.path, result.metrics, result.exact_exploitability, normalise)
        if isinstance(game, SEPOGame):
            write_action_rates(run.path, action_rates(iter_traces(run.traces_path)))
        status = run_status(result.episodes, errors)
        run.finish(status, episodes=result.episodes, errors=errors)
    return result


def runtime(max_live: int, player: Player | None) -> dict:
    """Returns the runtime settings a run folder records (they may change on resume)."""
    out: dict = {"max_live": max_live}
    if player is not None:
        out["player"] = getattr(player, "runtime", None) or getattr(player, "__name__", "custom")
    return out


def run_status(episodes: int, errors: int) -> str:
    """Returns ``complete`` (no errors), ``error`` (nothing completed) or ``partial``."""
    if not errors:
        return "complete"
    return "error" if errors >= episodes else "partial"


def _result(
    game: Game, agent: Agent, traces: Iterable[Trace], normalise: bool, out: Path | None
) -> Evaluation:
    """Metrics of ``traces`` (read once: SEPO metrics keep a summary per episode, not the
    trace), and the exact exploitability where the game has a solver tree."""
    episodes = 0
    first_error: str | None = None

    def counted() -> Iterator[Trace]:
        nonlocal episodes, first_error
        for t in traces:
            episodes += 1
            if t.status != "complete" and first_error is None:
                first_error = t.error
            yield t

    own = None if isinstance(game, SEPOGame) else game_metrics(game.name)
    if own is None:  # a game with neither SEPO hooks nor its own metrics is refused in evaluate
        metrics = sepo_metrics(counted(), game, normalise=normalise)
    else:
        metrics = own(list(counted()))
    result = Evaluation(game.name, agent.name, metrics, normalised=normalise, out=out)
    result.episodes, result.first_error = episodes, first_error
    if isinstance(game, HasSolverTree):
        result.policy = policy_of(agent, game)
        result.exact_exploitability = exploitability(game.game_tree(), result.policy)
    return result
