"""A person's episode against the model, and the worker that makes the model's decisions.

``HumanEpisode`` wraps one ``Episode`` with the person's seat and what the page needs: whose turn
it is, whether the model is thinking, a backend failure to retry, a version the page polls. The
person's turn is submitted on the request path (cheap); the model's turn never is: the episode is
handed to the ``ModelWorker``, whose one thread collects every episode waiting for the model and
makes one batched ``agent.act`` call for them all (the backend's batching, as in ``play``). An
episode is queued at most once, so at most one model call per game is in flight (RELIABILITY I7).

A backend failure (an exception, or a decision carrying ``error``) does not end the episode as
``Episode`` would for a batch run: the decision is dropped, the page shows "model unavailable,
retry", and ``retry`` queues the same observation again (I10). So does a model turn that runs past
``model_timeout`` seconds, whatever the backend (its corrections included): the worker's watchdog
fails it, and an answer that comes later is dropped. Model calls stay one at a time (one backend,
one call: a local model is never asked twice at once), so a retry is served once the late call has
returned.

Two locks per episode: ``gate`` admits one submission at a time (a second one at the same moment
gets 409 at once), ``lock`` guards the episode itself and is held only briefly, never across a
model call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stratagem.agent import Agent, Decision
from stratagem.episode import Episode
from stratagem.errors import StratagemError
from stratagem.game import Game, Observation, Seat
from stratagem.web.boards import Board, InputError

log = logging.getLogger("stratagem.web")
HUMAN = "human"


class Busy(RuntimeError):
    """The request conflicts with the episode's state (HTTP 409): another submission is being
    handled, it is not the person's turn, or there is nothing to retry."""


@dataclass
class HumanEpisode:
    """One game of a person (``human_seat``) against the model in the other seat."""

    game_id: str
    session_id: str
    game: Game
    board: Board
    agent: Agent
    agent_spec: str
    human_seat: Seat
    seed: int
    started: float = field(default_factory=time.time)  # wall clock, for the stored row
    touched: float = 0.0  # the service clock at the last request about this episode
    thinking: bool = False  # the model's decision is queued or being made
    failure: str | None = None  # the last backend failure, until a retry
    closed: bool = False  # stored (finished or abandoned): nothing changes any more
    version: int = 0  # bumped on every change; the page polls it
    model_timeout: float | None = None  # seconds the model may take for one turn (None: no limit)
    asked_at: float | None = None  # time.monotonic() when the model's turn began
    late: bool = False  # the failure is a turn past ``model_timeout``
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    gate: threading.Lock = field(default_factory=threading.Lock, repr=False)
    rules: dict[Seat, str] = field(default_factory=dict, repr=False)  # each seat's system turn

    def __post_init__(self) -> None:
        names = [self.agent.name, self.agent.name]
        names[self.human_seat] = HUMAN
        self.episode = Episode(
            self.game,
            self.game_id,
            self.seed,
            (names[0], names[1]),
            meta={
                "seat": self.model_seat,
                "human_seat": self.human_seat,
                "pool": HUMAN,
                "opponent": HUMAN,
                "agent_spec": self.agent_spec,
                "source": "serve",
            },
        )

    @property
    def model_seat(self) -> Seat:
        """The model's seat."""
        return 1 - self.human_seat

    @property
    def done(self) -> bool:
        """Whether the episode is over (by the rules, or abandoned)."""
        return self.episode.done

    def waiting(self, seat: Seat) -> Observation | None:
        """Returns ``seat``'s observation when it must answer now, else None (call with
        ``lock`` held)."""
        for obs in self.episode.waiting():
            self.rules.setdefault(obs.seat, obs.rules)
            if obs.seat == seat:
                return obs
        return None

    def advance(self) -> bool:
        """Steps the episode while every seat to act has answered; returns whether the model
        must now be asked (and marks it thinking). Call with ``lock`` held."""
        while self.episode.ready:
            self.episode.step()
        self.version += 1
        if self.done or self.thinking or self.failure is not None:
            return False
        if self.waiting(self.model_seat) is None:
            self.waiting(self.human_seat)  # records the person's rules on their first turn
            self.asked_at = None
            return False
        self.thinking = True
        if self.asked_at is None:  # a correction goes on with the same turn and deadline
            self.asked_at = time.monotonic()
        return True

    def submit(self, payload: Any) -> bool:
        """Submits the person's turn from a request body; returns whether the model must now
        be asked.

        Raises:
            Busy: another submission is in progress, or it is not the person's turn.
            InputError: the game is over or the input is refused (nothing changed).
        """
        if not self.gate.acquire(blocking=False):
            raise Busy("another move of this game is being handled")
        try:
            with self.lock:
                if self.done or self.closed:
                    raise InputError("the game is over")
                obs = self.waiting(self.human_seat)
                if obs is None:
                    raise Busy("it is not your turn: the model is playing")
                decision = self.board.decision(self.episode, obs, payload)
                self.episode.submit(self.human_seat, decision)
                return self.advance()
        finally:
            self.gate.release()

    def retry(self) -> bool:
        """Clears a backend failure so the model is asked again; returns True (the model must
        be asked).

        Raises:
            Busy: there is no failure to retry.
        """
        with self.lock:
            if self.failure is None or self.done or self.closed:
                raise Busy("there is nothing to retry")
            self.failure = None
            return self.advance()

    def model_observation(self) -> Observation | None:
        """Returns the observation the model must answer, or None when there is none any more
        (the episode was abandoned)."""
        with self.lock:
            if self.closed or self.done or self.failure is not None:
                self.thinking = False
                return None
            return self.waiting(self.model_seat)

    def model_answered(self, obs: Observation, decision: Decision) -> bool:
        """Submits the model's decision at ``obs``; returns whether the model must answer again
        (a correction, or its next turn right away). A decision carrying an error is a backend
        failure: nothing is submitted; nor is an answer that came after its turn failed (past
        its deadline) and before a retry."""
        with self.lock:
            if self.failure is not None:
                return False
            self.thinking = False
            if self.closed or self.done or self.waiting(self.model_seat) is not obs:
                return False
            if decision.error is not None:
                self._fail(decision.error)
                return False
            try:
                self.episode.submit(self.model_seat, decision)
            except StratagemError as exc:  # an agent that broke the rules: say so, keep going
                self._fail(str(exc))
                return False
            return self.advance()

    def model_failed(self, reason: str) -> None:
        """Records a backend failure: the page offers a retry (a turn that failed already,
        past its deadline, keeps that failure)."""
        with self.lock:
            if self.failure is not None:
                return
            self.thinking = False
            self._fail(reason)

    def expire(self, now: float) -> bool:
        """Fails the model's turn when it has run past ``model_timeout`` (the page offers a
        retry); returns whether it did. Takes the lock."""
        with self.lock:
            if (
                self.model_timeout is None
                or self.asked_at is None
                or not self.thinking
                or self.closed
                or self.done
                or now - self.asked_at <= self.model_timeout
            ):
                return False
            self.thinking = False
            self._fail(f"no answer within {self.model_timeout:g} s", late=True)
            return True

    def _fail(self, reason: str, late: bool = False) -> None:
        log.warning("game %s: model unavailable: %s", self.game_id[:8], reason)
        self.failure = reason
        self.late = late
        self.asked_at = None
        self.version += 1

    def abandon(self) -> None:
        """Ends a live episode as abandoned (call with ``lock`` held)."""
        if not self.done:
            self.episode.fail("abandoned")
        self.thinking = False
        self.version += 1

    def snapshot(self) -> dict[str, Any]:
        """Returns the page's JSON (``screen``), taking the lock."""
        with self.lock:
            return self.screen()

    def screen(self) -> dict[str, Any]:
        """Returns the page's JSON: the status flags (with the seconds the model has been on its
        turn, and its limit), the board's public view, the legal actions when it is the person's
        turn, and the outcome once over. Call with ``lock`` held."""
        obs = None if self.done else self.waiting(self.human_seat)
        over = self.done
        thinking_for = time.monotonic() - self.asked_at if self.thinking and self.asked_at else 0
        return {
            "game_id": self.game_id,
            "game": self.game.name,
            "version": self.version,
            "seat": self.human_seat,
            "your_turn": obs is not None and not self.closed,
            "thinking": self.thinking,
            "thinking_seconds": round(thinking_for, 1),
            "model_timeout": self.model_timeout,
            "model_unavailable": self.failure is not None,
            "model_late": self.failure is not None and self.late,
            "over": over,
            "abandoned": self.episode.error is not None,
            "legal": list(obs.legal) if obs is not None else [],
            "board": self.board.public(self.episode, self.human_seat),
            "outcome": (
                self.board.outcome(self.episode, self.human_seat)
                if over and self.episode.error is None
                else None
            ),
        }


class ModelWorker:
    """One thread that makes the model's decisions: each pass takes every queued episode (up to
    ``max_batch``) and asks the agent once for all of them; a second one, the watchdog, fails
    every model turn past its episode's ``model_timeout`` (checked each ``tick`` seconds)."""

    def __init__(
        self,
        agent: Agent,
        on_change: Callable[[HumanEpisode], None],
        max_batch: int = 64,
        tick: float = 0.25,
    ):
        """Starts the threads; ``on_change`` runs (outside the episode lock) after each model
        decision is applied or turn failed, e.g. to store an episode that just finished."""
        self.agent = agent
        self.on_change = on_change
        self.max_batch = max_batch
        self.tick = tick
        self.calls = 0  # agent.act calls made
        self._queue: list[HumanEpisode] = []
        self._watched: dict[str, HumanEpisode] = {}  # by game id: episodes whose model is asked
        self._cond = threading.Condition()
        self._stopped = False
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stratagem-model", daemon=True)
        self._thread.start()
        self._watchdog = threading.Thread(
            target=self._watch, name="stratagem-deadline", daemon=True
        )
        self._watchdog.start()

    def request(self, human: HumanEpisode) -> None:
        """Queues ``human`` for a model decision (once, however often it is asked)."""
        with self._cond:
            self._watched[human.game_id] = human
            if human not in self._queue:
                self._queue.append(human)
                self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Stops the threads after the call in progress."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._halt.set()
        self._thread.join(timeout)
        self._watchdog.join(timeout)

    def _watch(self) -> None:
        while not self._halt.wait(self.tick):
            with self._cond:
                watched = list(self._watched.values())
            now = time.monotonic()
            for human in watched:
                try:
                    if human.expire(now):
                        self.on_change(human)
                except Exception:  # never let the watchdog die
                    log.exception("checking the deadline of a model turn failed")
            with self._cond:  # forget what no longer waits for the model (request adds it back)
                for game_id in [g for g, h in self._watched.items() if not h.thinking]:
                    del self._watched[game_id]

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            try:
                self._serve(batch)
            except Exception:  # never let the thread die: the next pass may work
                log.exception("model worker pass failed")

    def _serve(self, batch: list[HumanEpisode]) -> None:
        jobs = [(h, obs) for h in batch if (obs := h.model_observation()) is not None]
        if not jobs:
            return
        self.calls += 1
        try:
            decisions = self.agent.act([obs for _, obs in jobs])
        except Exception as exc:  # the backend failed: every game of the batch may retry
            log.warning("model call failed: %s: %s", type(exc).__name__, exc)
            for human, _ in jobs:
                human.model_failed(f"{type(exc).__name__}")
                self.on_change(human)
            return
        for (human, obs), decision in zip(jobs, decisions, strict=True):
            if human.model_answered(obs, decision):
                self.request(human)
            self.on_change(human)
