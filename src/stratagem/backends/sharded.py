"""A backend whose calls are split over Ray workers (SPEC §10): tree expansion on many processes.

Dialogue trees (``solvers.dialogue``) ask their backend for one batch per depth: every message of
that depth in every tree. ``RayBackend`` cuts such a batch into one contiguous shard per worker,
each worker (a Ray actor holding its own model, built once from a picklable factory) answers its
shard, and the answers come back in the original order. It sits under ``CachedBackend``, so the
driver alone reads and writes the response cache, and a rerun or a second solver costs no call
wherever it did locally.

A message depends on (chat, sampling, seed) only, so a shard's answers are the ones the whole
batch would have had, up to what a local model's batch shape does to the last bits of its logits
(measured in ``solvers.dialogue``: 1 of 3 embedded-SmolLM2 messages changed between alone and a
batch of three); with a remote or rule-like backend they are equal. A worker that dies loses only
its shard, which a fresh worker answers again; a ``StratagemError`` on a worker (a refused API
key, a missing model) is raised on the driver as itself.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from stratagem.backends.base import Backend, Chat, Generation, Sampling, StopCheck
from stratagem.cluster import CONNECT_TIMEOUT
from stratagem.errors import ConfigError, StratagemError

__all__ = ["RayBackend", "ShardWorker", "shards"]


def shards(n: int, parts: int) -> list[range]:
    """Splits ``range(n)`` into at most ``parts`` contiguous, non-empty ranges whose sizes
    differ by at most one (earlier ranges take the remainder)."""
    parts = max(1, min(parts, n))
    size, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(range(start, end))
        start = end
    return [r for r in out if len(r)]


class ShardWorker:
    """What a Ray actor holds: one backend, built once by ``factory`` on first use and used for
    every shard (a model loads once per worker).

    Plain Python (wrapped with ``ray.remote`` at run time), so it is also usable in-process.
    The backend is built in a method, not in ``__init__``, so that a factory's error (a missing
    model) reaches the driver as a task error it can raise as itself.
    """

    def __init__(self, factory: Callable[[], Backend]):
        """Keep the factory; the backend is built by the first call."""
        self.factory = factory
        self._backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        """The backend, built on first use."""
        if self._backend is None:
            self._backend = self.factory()
        return self._backend

    def pid(self) -> int:
        """Returns this worker's process id (tests kill workers by it)."""
        return os.getpid()

    def model_id(self) -> str:
        """Returns the backend's model id (building the backend)."""
        return self._call(lambda: self.backend.model_id)

    def fingerprint(self) -> str:
        """Returns what names the backend's exact weights: its ``fingerprint`` where it has one
        (a content hash of a local model's weights, adapters and dtype), else its model id."""
        return self._call(
            lambda: getattr(self.backend, "fingerprint", None) or self.backend.model_id
        )

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        seeds: Sequence[int] | None,
        stop: Sequence[StopCheck | None] | None,
    ) -> list[Generation]:
        """The backend's ``generate`` on one shard."""
        return self._call(self.backend.generate, chats, sampling, seeds=seeds, stop=stop)

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """The backend's ``choice_probs`` on one shard."""
        return self._call(self.backend.choice_probs, chats, choices)

    @staticmethod
    def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except StratagemError as exc:
            from stratagem.cluster import RaisedOnWorker

            raise RaisedOnWorker.of(exc) from None


class RayBackend:
    """A ``Backend`` whose every call is split over ``workers`` Ray actors (see the module
    docstring); ``close`` ends them (and the local cluster it started).

    Args:
        factory: A picklable callable building the backend on a worker, e.g.
            ``functools.partial(make_backend, "hf", LLMOptions())``.
        address: A Ray cluster's address, or None / ``local`` for a local cluster of ``workers``
            CPUs started for this backend.
        workers: Ray workers, each with its own model (default: one per CPU of the cluster).
        gpus_per_worker: GPUs each worker reserves (default 1 where the cluster has GPUs).
        max_worker_deaths: Worker deaths tolerated before a call fails (default
            ``2 * workers + 2``); a dead worker's shard is answered again by a fresh one.
        connect_timeout: Seconds the cluster at ``address`` gets to accept a connection.
    """

    def __init__(
        self,
        factory: Callable[[], Backend],
        *,
        address: str | None = None,
        workers: int | None = None,
        gpus_per_worker: float | None = None,
        max_worker_deaths: int | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ):
        from stratagem.cluster import connect

        if workers is not None and workers < 1:
            raise ConfigError("--workers must be at least 1")
        self.ray, self._started = connect(address, workers, connect_timeout)
        resources = self.ray.cluster_resources()
        gpus = resources.get("GPU", 0)
        self.gpus = (1.0 if gpus else 0.0) if gpus_per_worker is None else gpus_per_worker
        default = int(gpus) if self.gpus else int(resources.get("CPU", 1))
        self.n = max(1, workers or default)
        self.max_deaths = 2 * self.n + 2 if max_worker_deaths is None else max_worker_deaths
        self.deaths = 0
        self.factory = factory
        self._actor = self.ray.remote(ShardWorker).options(num_cpus=1, num_gpus=self.gpus)
        self.actors = [self._actor.remote(factory) for _ in range(self.n)]
        try:  # every worker builds its model now, in parallel: a bad spec fails here, once
            ids = [self._get(ref) for ref in [a.model_id.remote() for a in self.actors]]
        except BaseException:
            self.close()
            raise
        self.model_id: str = ids[0]
        self.pids: list[int] = [self._get(a.pid.remote()) for a in self.actors]

    @functools.cached_property
    def fingerprint(self) -> str:
        """The workers' model fingerprint (worker 0's: every worker builds the same backend),
        asked on first use, so that ``CachedBackend`` keys a sharded model's answers exactly as
        it keys the local model's (RELIABILITY C1), and only a caching caller pays for hashing."""
        return str(self._get(self.actors[0].fingerprint.remote()))

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
    ) -> list[Generation]:
        """Returns one completion per chat, in order; each worker answers one shard."""

        def submit(actor: Any, rows: range) -> Any:
            return actor.generate.remote(
                [chats[i] for i in rows],
                sampling,
                [seeds[i] for i in rows] if seeds is not None else None,
                [stop[i] for i in rows] if stop is not None else None,
            )

        return self._scatter(len(chats), submit)

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns each chat's distribution over its choices, in order, shard by shard."""

        def submit(actor: Any, rows: range) -> Any:
            return actor.choice_probs.remote([chats[i] for i in rows], [choices[i] for i in rows])

        return self._scatter(len(chats), submit)

    def close(self) -> None:
        """End the workers, and the Ray cluster if this backend started it."""
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []
        if self._started:
            self.ray.shutdown()
            self._started = False

    def _scatter(self, n: int, submit: Callable[[Any, range], Any]) -> list[Any]:
        """Sends shard w of ``range(n)`` to worker w, gathers the answers in order, and gives
        a dead worker's shard to its replacement."""
        from ray import exceptions as rx

        parts = shards(n, self.n)
        out: list[Any] = [None] * n
        pending = {submit(self.actors[w], rows): (w, rows) for w, rows in enumerate(parts)}
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                w, rows = pending.pop(ref)
                try:
                    answers = self._get(ref)
                except (rx.RayActorError, rx.WorkerCrashedError, rx.ObjectLostError) as exc:
                    self._replace(w, exc)
                    pending[submit(self.actors[w], rows)] = (w, rows)
                    continue
                for i, answer in zip(rows, answers, strict=True):
                    out[i] = answer
        return out

    def _replace(self, w: int, exc: BaseException) -> None:
        from stratagem.cluster import RayWorkerError, first_line

        self.deaths += 1
        if self.deaths > self.max_deaths:
            raise RayWorkerError(
                f"Ray workers died {self.deaths} times (last: {first_line(exc)}); answers "
                "already cached are kept, rerun the same command to go on"
            )
        self.ray.kill(self.actors[w], no_restart=True)
        self.actors[w] = self._actor.remote(self.factory)
        self._get(self.actors[w].model_id.remote())
        self.pids[w] = self._get(self.actors[w].pid.remote())

    def _get(self, ref: Any) -> Any:
        """``ray.get``, raising a worker's ``StratagemError`` as itself."""
        from ray import exceptions as rx

        from stratagem.cluster import RaisedOnWorker

        try:
            return self.ray.get(ref)
        except rx.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RaisedOnWorker):
                raise cause.rebuild() from None
            raise
