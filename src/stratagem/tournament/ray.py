"""Scale-out on Ray: workers play the episodes, the driver alone writes the run (SPEC §10).

``RayPlayer`` is a drop-in for the local scheduler ``play``: ``RunFolder.play(..., player=...)``
hands it the run's keyed ``EpisodeSpec``s and it yields traces as they finish, so the run
folder's lock, resume (skip the ids already on disk) and exactly-once writing stay in one place.

How a run goes:

1. The driver turns each ``EpisodeSpec`` into a ``MatchSpec``: plain data (episode id, seed, an
   agent spec string per seat, meta, the scenario as a dict), because an ``EpisodeSpec`` holds
   agent *objects* that cannot travel to another machine.
2. Each Ray worker (an actor: one per CPU, or one per GPU for model agents on a GPU cluster)
   rebuilds the game from its ``GameSpec`` and each agent from its spec string once, and keeps
   them for every chunk it plays (a model loads once per worker).
3. Workers play chunks of match specs with the same ``play``/``Episode`` code as a local run and
   stream finished traces back (a list every ``flush_seconds``); each worker holds two chunks so
   it never waits for the driver.
4. A worker that dies loses only the episodes whose traces had not reached the driver: they are
   played again by a fresh worker. Traces never depend on where an episode ran (rule-based play
   is seeded per decision; sampled LLM text depends only on (prompt, decision seed)), so the
   trace file equals a local run's, line order aside.

Departures from a local run: an LLM agent's batch is the chunk a worker holds, not every live
episode of the run. Sampling is seeded per decision, so texts and actions stay the same, but the
last bits of the logits depend on the batch's shape (RELIABILITY D4): measured on the embedded
model in fp32, texts, actions and payoffs are equal and fallback probabilities differ by about
1e-6; in bf16 (``dtype=auto`` on CPUs with native bf16) greedy near-ties can flip and texts then
differ. The driver checks the folder and writes traces, and only the workers call agents (the
evaluated agent is still built on the driver where metrics need it, e.g. Kuhn's exact
exploitability).
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal

from stratagem.agent import Agent
from stratagem.agents.spec import LLMOptions, agent_kind
from stratagem.cluster import (
    CONNECT_TIMEOUT,
    LOCAL,
    RaisedOnWorker,
    RayWorkerError,
    connect,
    first_line,
)
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError, StratagemError
from stratagem.game import Game
from stratagem.games import GameSpec
from stratagem.tournament.schedule import MatchSpec, match_spec
from stratagem.trace import Trace

__all__ = ["RayPlayer", "Worker"]

MODEL_KINDS = ("hf", "vllm")  # agent kinds that want a GPU per worker when the cluster has GPUs


class Worker:
    """What a Ray actor holds: the game and the agents, built once and reused for every chunk.

    Plain Python (Ray wraps it with ``ray.remote`` at run time), so it is also usable, and
    tested, in-process.
    """

    def __init__(self, game: GameSpec, options: LLMOptions):
        """Build the game; agents are built on first use, one per spec string."""
        self.game = game.build()
        self.options = options
        self.agents: dict[str, Agent] = {}

    def pid(self) -> int:
        """Returns this worker's process id (health check; tests kill workers by it)."""
        return os.getpid()

    def agent(self, spec: str) -> Agent:
        """Returns the agent ``spec`` names, building it on first use."""
        if spec not in self.agents:
            from stratagem.agents.spec import make_agent

            self.agents[spec] = make_agent(spec, self.game, self.options)
        return self.agents[spec]

    def play(
        self,
        chunk: Sequence[MatchSpec],
        on_error: Literal["raise", "record"] = "record",
        flush_seconds: float = 0.1,
    ) -> Iterator[list[Trace]]:
        """Play every match of ``chunk`` together; yield the finished traces in lists, one at
        least every ``flush_seconds`` while episodes finish, and the rest at the end."""
        from stratagem.play import play

        try:
            specs = [m.episode((self.agent(m.agents[0]), self.agent(m.agents[1]))) for m in chunk]
            done: list[Trace] = []
            last = time.monotonic()
            for trace in play(self.game, specs, max_live=max(len(specs), 1), on_error=on_error):
                done.append(trace)
                if time.monotonic() - last >= flush_seconds:
                    yield done
                    done, last = [], time.monotonic()
            if done:
                yield done
        except StratagemError as exc:
            raise RaisedOnWorker.of(exc) from None


@dataclass
class _Chunk:
    worker: int
    remaining: dict[str, MatchSpec]  # episode id -> spec, until its trace reaches the driver


class RayPlayer:
    """Plays episodes on a Ray cluster; called like ``play`` (``RunFolder.play(player=...)``).

    Args:
        agents: agent name -> spec string, for agents that are neither ``RemoteAgent``s nor a
            game's strategy with default parameters (e.g. ``{"llm:SmolLM2-135M-Instruct": "hf"}``).
        options: the LLM options workers build model agents with.
        address: a Ray cluster's address (``auto``, ``ray://host:10001``, ``host:6379``), or
            ``None`` / ``"local"`` to start a local cluster of ``workers`` CPUs for this run.
        workers: how many Ray workers play; default one per CPU of the cluster, or one per GPU
            when a model agent plays and the cluster has GPUs.
        chunk: episodes per chunk a worker plays at once (an LLM agent's largest batch);
            default ``max_live`` spread over the workers' two chunks each.
        gpus_per_worker: GPUs each worker reserves; default 1 for model agents (``hf``,
            ``vllm``) on a cluster with GPUs, else 0.
        max_worker_deaths: worker deaths tolerated in one run before it stops (default
            ``2 * workers + 2``); their unfinished episodes are rescheduled.
        flush_seconds: how often a worker sends back the traces finished so far.
        connect_timeout: seconds the cluster at ``address`` gets to accept a connection.
    """

    def __init__(
        self,
        agents: Mapping[str, str] | None = None,
        *,
        options: LLMOptions | None = None,
        address: str | None = None,
        workers: int | None = None,
        chunk: int | None = None,
        gpus_per_worker: float | None = None,
        max_worker_deaths: int | None = None,
        flush_seconds: float = 0.1,
        connect_timeout: float = CONNECT_TIMEOUT,
    ):
        """Store the settings; nothing connects to Ray until the player is called."""
        if workers is not None and workers < 1:
            raise ConfigError("--workers must be at least 1")
        if chunk is not None and chunk < 1:
            raise ConfigError("the chunk size must be at least 1")
        self.agents = dict(agents or {})
        self.options = options or LLMOptions()
        self.address = None if address in (None, "", LOCAL) else address
        self.workers = workers
        self.chunk = chunk
        self.gpus_per_worker = gpus_per_worker
        self.max_worker_deaths = max_worker_deaths
        self.flush_seconds = flush_seconds
        self.connect_timeout = connect_timeout
        self.pids: list[int] = []  # process ids of the live workers (tests, monitoring)
        self.deaths = 0  # workers that died during the last call

    @property
    def runtime(self) -> dict[str, Any]:
        """The player's runtime settings, for the run folder's manifest (not its fingerprint)."""
        return {"ray": self.address or LOCAL, "workers": self.workers}

    def __call__(
        self,
        game: Game,
        episodes: Iterable[EpisodeSpec],
        *,
        max_live: int = 256,
        skip: Iterable[str] = (),
        on_error: Literal["raise", "record"] = "raise",
        on_finish: Callable[[Trace], None] | None = None,
    ) -> Iterator[Trace]:
        """Play ``episodes`` on Ray; yield each trace as it reaches the driver (``play``'s
        contract: ids in ``skip`` are not played, ``on_finish`` sees every trace first).

        Raises ``RayWorkerError`` when Ray is missing or workers die more than
        ``max_worker_deaths`` times, and re-raises a worker's ``StratagemError`` as is.
        """
        skip = set(skip)
        todo = (match_spec(s, game, self.agents) for s in episodes if s.episode_id not in skip)
        first = next(todo, None)
        if first is None:
            return  # nothing left to play (a finished run resumed): Ray is not started
        ray, started = self._connect()
        try:
            run = _Run(self, ray, game, chain([first], todo), max_live, on_error, on_finish)
            yield from run.traces()
        finally:
            self.pids = []
            if started:
                ray.shutdown()

    def _connect(self) -> tuple[Any, bool]:
        """Returns (the ray module, whether this call started the connection)."""
        return connect(self.address, self.workers, self.connect_timeout)


class _Run:
    """One call of a ``RayPlayer``: the worker pool, the chunks in flight and the requeue."""

    DEPTH = 2  # chunks submitted to each worker: one playing, one waiting its turn

    def __init__(
        self,
        player: RayPlayer,
        ray: Any,
        game: Game,
        todo: Iterator[MatchSpec],
        max_live: int,
        on_error: str,
        on_finish: Callable[[Trace], None] | None,
    ):
        self.player, self.ray, self.todo = player, ray, todo
        self.on_error, self.on_finish = on_error, on_finish
        self.game_spec = GameSpec.of(game)
        self.queue: deque[MatchSpec] = deque()
        self.exhausted = False
        self.max_live = max_live
        self.n = self.chunk = self.max_deaths = 1
        self.gpus = 0.0
        self.actors: list[Any] = []
        self.last_death = ""
        self.running: dict[Any, _Chunk] = {}  # streaming generator -> its chunk

    def _size(self) -> None:
        """Workers, GPUs each and chunk size, from the cluster and the first ``max_live``
        episodes (model agents get a GPU per worker where the cluster has GPUs)."""
        player, resources = self.player, self.ray.cluster_resources()
        while len(self.queue) < self.max_live and not self.exhausted:
            spec = next(self.todo, None)
            if spec is None:
                self.exhausted = True
            else:
                self.queue.append(spec)
        models = any(agent_kind(a) in MODEL_KINDS for m in self.queue for a in m.agents)
        if player.gpus_per_worker is not None:
            self.gpus = player.gpus_per_worker
        else:
            self.gpus = 1.0 if models and resources.get("GPU", 0) else 0.0
        default = int(resources.get("GPU", 0)) if self.gpus else int(resources.get("CPU", 1))
        self.n = max(1, player.workers or default)
        self.chunk = player.chunk or max(1, self.max_live // (self.n * self.DEPTH))
        self.max_deaths = (
            player.max_worker_deaths if player.max_worker_deaths is not None else 2 * self.n + 2
        )
        self.actor_class = self.ray.remote(Worker).options(num_cpus=1, num_gpus=self.gpus)

    def traces(self) -> Iterator[Trace]:
        """Yields every trace once, as workers deliver them."""
        self.player.deaths = 0
        self._size()
        self.actors = [self._spawn() for _ in range(self.n)]
        self.player.pids = self._pids()
        for w in range(self.n):
            for _ in range(self.DEPTH):
                self._submit(w)
        while self.running:
            # a bounded wait, so Ctrl-C and SIGTERM reach the driver promptly
            ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=0.5)
            for gen in ready:
                yield from self._collect(gen)

    def _collect(self, gen: Any) -> Iterator[Trace]:
        from ray import exceptions as rx

        chunk = self.running[gen]
        try:
            ref = next(gen)
            batch = self.ray.get(ref)
        except StopIteration:
            del self.running[gen]
            if chunk.remaining:  # a worker that ended a chunk early: play those again
                self._requeue(chunk)
            self._submit(chunk.worker)
            return
        except rx.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RaisedOnWorker):
                raise cause.rebuild() from None
            raise
        except (rx.RayActorError, rx.WorkerCrashedError, rx.ObjectLostError) as exc:
            self.last_death = first_line(exc)
            self._replace(chunk.worker)
            return
        for trace in batch:
            if chunk.remaining.pop(trace.episode_id, None) is None:
                continue  # already delivered (never expected: a guard for exactly-once)
            if self.on_finish is not None:
                self.on_finish(trace)
            yield trace

    def _spawn(self) -> Any:
        return self.actor_class.remote(self.game_spec, self.player.options)

    def _pids(self) -> list[int]:
        """The workers' process ids (-1 for one that failed to start: its first chunk fails
        and it is replaced like any dead worker)."""
        from ray import exceptions as rx

        pids = []
        for ref in [a.pid.remote() for a in self.actors]:
            try:
                pids.append(self.ray.get(ref))
            except rx.RayActorError as exc:
                self.last_death = first_line(exc)
                pids.append(-1)
        return pids

    def _take(self) -> list[MatchSpec]:
        """The next chunk: requeued episodes first; chunks shrink near the end so every worker
        gets a share."""
        lookahead = self.chunk * self.n * self.DEPTH
        while not self.exhausted and len(self.queue) < lookahead:
            spec = next(self.todo, None)
            if spec is None:
                self.exhausted = True
            else:
                self.queue.append(spec)
        size = self.chunk
        if self.exhausted:
            size = min(size, max(1, math.ceil(len(self.queue) / self.n)))
        return [self.queue.popleft() for _ in range(min(size, len(self.queue)))]

    def _submit(self, w: int) -> None:
        chunk = self._take()
        if not chunk:
            return
        gen = (
            self.actors[w]
            .play.options(num_returns="streaming")
            .remote(chunk, self.on_error, self.player.flush_seconds)
        )
        self.running[gen] = _Chunk(w, {m.episode_id: m for m in chunk})

    def _requeue(self, chunk: _Chunk) -> None:
        self.queue.extendleft(reversed(list(chunk.remaining.values())))

    def _replace(self, w: int) -> None:
        """Worker ``w`` died: requeue the unfinished episodes of its chunks, start a fresh
        worker in its place and give it work."""
        self.player.deaths += 1
        lost = [gen for gen, c in self.running.items() if c.worker == w]
        for gen in reversed(lost):  # its waiting chunk goes back behind its playing one
            self._requeue(self.running.pop(gen))
        if self.player.deaths > self.max_deaths:
            raise RayWorkerError(
                f"Ray workers died {self.player.deaths} times (last: {self.last_death}); "
                "finished episodes are saved, rerun the same command to resume"
            )
        self.ray.kill(self.actors[w], no_restart=True)
        self.actors[w] = self._spawn()
        self.player.pids = self._pids()
        for _ in range(self.DEPTH):
            self._submit(w)
