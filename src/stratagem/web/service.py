"""The play page's server-side state: ``PlayService`` holds every session, live episode, rate
limit, the model worker and the games database in one object (no module-level per-game or
per-user state, RELIABILITY I1); ``app`` wires it to HTTP.

A session is one browser (its signed cookie names it); each holds its games and at most one live
game. A finished game is stored once, when it ends; an idle or left one is stored as abandoned
(``close``); ``reap`` forgets stored games and idle sessions.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stratagem.agent import Agent
from stratagem.game import Game
from stratagem.web.boards import Board, board_for
from stratagem.web.episodes import HumanEpisode, ModelWorker
from stratagem.web.security import RateLimiter, new_id, unsign
from stratagem.web.storage import GameRecord, GameStore, Status, now_iso

log = logging.getLogger("stratagem.web")


@dataclass(frozen=True)
class Limits:
    """Rate limits and bounds of the play page (RELIABILITY I4, I7)."""

    turns_per_minute: int = 30  # turns and retries of one session
    turns_per_minute_ip: int = 120  # of one IP address, all its sessions together
    games_per_hour: int = 30  # new games of one session
    games_per_hour_ip: int = 120
    reads_per_minute: int = 300  # state polls of one session (the page polls 200 a minute at most)
    reads_per_minute_ip: int = 1200  # state reads of one IP address without a session
    games_per_session: int = 200
    idle_seconds: float = 900.0  # a live game untouched this long is stored as abandoned
    model_timeout: float | None = 120.0  # seconds the model may take for a turn; then a retry
    max_body_bytes: int = 16_384
    cookie_seconds: int = 7 * 24 * 3600


class Forbidden(PermissionError):
    """HTTP 403: another session's game, or a cross-site request."""


class NotFound(LookupError):
    """HTTP 404: no such game (never created, or forgotten after it was stored)."""


class Limited(RuntimeError):
    """HTTP 429: a rate limit; ``retry_after`` in whole seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Session:
    """One browser's games (its cookie names it)."""

    id: str
    games: list[str] = field(default_factory=list)
    live: str | None = None  # the game in play, if any
    touched: float = field(default_factory=time.monotonic)


class PlayService:
    """All server-side state of the play page: sessions, live games, limits, the model worker,
    the games database."""

    def __init__(
        self,
        game: Game,
        agent: Agent,
        agent_spec: str,
        store: GameStore,
        key: bytes,
        limits: Limits | None = None,
        *,
        human_seat: int | None = None,
        max_batch: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ):
        """Serves ``game`` with ``agent`` in the seat the person does not take.

        Args:
            game: the game played.
            agent: the opponent.
            agent_spec: the spec ``agent`` was built from (stored with every game).
            store: where finished and abandoned games go.
            key: signs session cookies.
            limits: rate limits and bounds (the defaults of ``Limits`` when None).
            human_seat: the person's seat when a request names none (None: drawn per game).
            max_batch: the most games one model call serves.
            clock: monotonic seconds, for idle times and rate limits (tests pass a fake one).
        """
        self.game = game
        self.board: Board = board_for(game.name)
        self.agent = agent
        self.agent_spec = agent_spec
        self.store = store
        self.key = key
        self.limits = limits or Limits()
        self.human_seat = human_seat
        self.clock = clock
        self.limiter = RateLimiter(clock)
        self.sessions: dict[str, Session] = {}
        self.games: dict[str, HumanEpisode] = {}
        self._lock = threading.Lock()  # guards ``sessions`` and ``games``
        self.worker = ModelWorker(agent, self.after_change, max_batch=max_batch)

    def session(self, cookie: str | None) -> Session | None:
        """Returns the session a cookie names, or None (no cookie, a tampered one, or a session
        this server does not know)."""
        session_id = unsign(self.key, cookie)
        with self._lock:
            session = self.sessions.get(session_id) if session_id else None
            if session is not None:
                session.touched = self.clock()
            return session

    def new_game(self, session: Session | None, ip: str, seat: int | None) -> HumanEpisode:
        """Starts a game for ``session`` (a new session when None); a live game of the session
        is stored as abandoned first.

        Raises:
            Limited: the session or IP started too many games lately, or the session reached
                ``games_per_session``.
        """
        limits = self.limits
        if session is not None:
            if len(session.games) >= limits.games_per_session:
                raise Limited(f"this session has played {limits.games_per_session} games", 3600)
            self.check_limit(f"games:{session.id}", limits.games_per_hour, 3600.0)
        self.check_limit(f"games-ip:{ip}", limits.games_per_hour_ip, 3600.0)
        with self._lock:
            if session is None:
                session = Session(new_id(), touched=self.clock())
                self.sessions[session.id] = session
                self.limiter.hit(f"games:{session.id}", limits.games_per_hour, 3600.0)
            previous = self.games.get(session.live) if session.live else None
        if previous is not None:
            self.close(previous, "abandoned")
        human = HumanEpisode(
            game_id=new_id(),
            session_id=session.id,
            game=self.game,
            board=self.board,
            agent=self.agent,
            agent_spec=self.agent_spec,
            human_seat=self._seat(seat),
            seed=secrets.randbits(32),
            touched=self.clock(),
            model_timeout=limits.model_timeout,
        )
        with self._lock:
            self.games[human.game_id] = human
            session.games.append(human.game_id)
            session.live = human.game_id
        with human.lock:
            ask = human.advance()
        if ask:
            self.worker.request(human)
        return human

    def _seat(self, seat: int | None) -> int:
        if seat is not None:
            return seat
        return secrets.randbelow(2) if self.human_seat is None else self.human_seat

    def game_of(self, session: Session | None, game_id: str) -> HumanEpisode:
        """Returns the game ``game_id`` of ``session``.

        Raises:
            NotFound: no such game.
            Forbidden: the game belongs to another session (or the request has none).
        """
        with self._lock:
            human = self.games.get(game_id)
        if human is None:
            raise NotFound("no such game")
        if session is None or human.session_id != session.id:
            raise Forbidden("this game belongs to another session")
        human.touched = self.clock()
        return human

    def check_read(self, session: Session | None, ip: str) -> None:
        """Counts one read against its session, or against its IP address when it has none:
        people behind one address (a school, a lab) each poll at the page's own pace."""
        if session is not None:
            self.check_limit(f"reads:{session.id}", self.limits.reads_per_minute, 60.0)
        else:
            self.check_limit(f"reads-ip:{ip}", self.limits.reads_per_minute_ip, 60.0)

    def check_limit(self, key: str, limit: int, window: float) -> None:
        """Counts one hit of ``key``; raises ``Limited`` past ``limit`` per ``window``."""
        wait = self.limiter.hit(key, limit, window)
        if wait is not None:
            raise Limited("too many requests; wait a little", wait)

    def turn(self, session: Session, human: HumanEpisode, ip: str, payload: Any) -> None:
        """Submits the person's turn (rate-limited per session and IP) and asks the model when
        it is its turn."""
        self.check_limit(f"turns:{session.id}", self.limits.turns_per_minute, 60.0)
        self.check_limit(f"turns-ip:{ip}", self.limits.turns_per_minute_ip, 60.0)
        if human.submit(payload):
            self.worker.request(human)
        self.after_change(human)

    def retry(self, session: Session, human: HumanEpisode, ip: str) -> None:
        """Asks the model again after a backend failure (rate-limited like a turn)."""
        self.check_limit(f"turns:{session.id}", self.limits.turns_per_minute, 60.0)
        self.check_limit(f"turns-ip:{ip}", self.limits.turns_per_minute_ip, 60.0)
        if human.retry():
            self.worker.request(human)

    def after_change(self, human: HumanEpisode) -> None:
        """Stores a game that just finished (once). A failed write is logged, not raised: the
        person's move stands, and the reaper writes the game again once it is idle."""
        if human.done and not human.closed:
            with contextlib.suppress(Exception):
                self.close(human, _ending(human))

    def close(self, human: HumanEpisode, status: Status) -> bool:
        """Stores ``human`` as ``finished`` or ``abandoned`` (a live game is ended first) and
        frees its session's live slot; returns False when it was stored already."""
        with human.lock:
            if human.closed:
                return False
            if status == "abandoned":
                human.abandon()
            record = self._record(human, status)
            try:
                self.store.save(record)
            except Exception:
                log.exception("game %s could not be stored", human.game_id[:8])
                raise
            human.closed = True
            human.version += 1
        with self._lock:
            session = self.sessions.get(human.session_id)
            if session is not None and session.live == human.game_id:
                session.live = None
        return True

    def _record(self, human: HumanEpisode, status: Status) -> GameRecord:
        episode = human.episode
        trace = episode.trace()
        h, m = human.human_seat, human.model_seat
        totals = trace.totals() if status == "finished" else None
        return GameRecord(
            game_id=human.game_id,
            game=self.game.name,
            game_version=self.game.version,
            game_params=dict(self.game.params),
            status=status,
            agent_spec=self.agent_spec,
            agent_name=self.agent.name,
            human_seat=h,
            human_score=totals[h] if totals else None,
            model_score=totals[m] if totals else None,
            started=now_iso(human.started),
            ended=now_iso(),
            human_view={"system": human.rules.get(h), "screen": human.screen()},
            model_view={
                "system": human.rules.get(m),
                "chat": [message.to_dict() for message in episode.chat(m)],
            },
            trace=trace,
        )

    def reap(self, now: float | None = None) -> int:
        """Stores live games idle for ``idle_seconds`` as abandoned, forgets stored games and
        empty sessions idle as long, and prunes rate-limit counters; returns the games
        abandoned."""
        now = self.clock() if now is None else now
        idle = self.limits.idle_seconds
        with self._lock:
            stale = [h for h in self.games.values() if now - h.touched > idle]
        abandoned = 0
        for human in stale:
            if human.closed:
                continue
            ending = _ending(human)
            if self.close(human, ending) and ending == "abandoned":
                abandoned += 1
        with self._lock:
            for human in stale:
                if human.closed:
                    self.games.pop(human.game_id, None)
            for sid in [
                s.id for s in self.sessions.values() if s.live is None and now - s.touched > idle
            ]:
                del self.sessions[sid]
        self.limiter.prune(3600.0)
        return abandoned

    def shutdown(self) -> None:
        """Stores every live game as abandoned and stops the model worker."""
        with self._lock:
            live = [h for h in self.games.values() if not h.closed]
        for human in live:
            with contextlib.suppress(Exception):
                self.close(human, _ending(human))
        self.worker.stop()


def _ending(human: HumanEpisode) -> Status:
    """How a game that is being closed ends: ``finished`` if it reached its end by the rules
    (its storing failed earlier and is retried), else ``abandoned``."""
    return "finished" if human.done and human.episode.error is None else "abandoned"
