"""The play page's server-side state: ``PlayService`` holds every session, live episode, rate
limit, the model worker and the games database in one object (no module-level per-game or
per-user state, RELIABILITY I1); ``app`` wires it to HTTP.

A session is one browser (its signed cookie names it) for one participant; each holds its
games, at most one of them in play, and, in a study, its participant id and that participant's
consent. Another id given in the same browser starts another session (a new cookie): its own
consent gate, games and screen, never the previous person's. Every game is a database row from its
start: written ``live`` when it starts and after every move (``after_change``), then once more
as ``finished`` when it ends, or ``abandoned`` when it is left or idle (``close``); ``reap``
forgets stored games and idle sessions. A game the server no longer holds answers 404 with its
stored status, so a page left open over it can say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from stratagem.agent import Agent
from stratagem.game import Game
from stratagem.web.boards import Board, board_for
from stratagem.web.episodes import HumanEpisode, ModelWorker
from stratagem.web.errors import Forbidden, Limited, NotFound
from stratagem.web.records import LIVE_ERROR, GameRecord, Status, configuration_id
from stratagem.web.security import RateLimiter, new_id, unsign
from stratagem.web.sessions import Limits, Participants, Session
from stratagem.web.storage import GameStore, now_iso
from stratagem.web.study import Study, agent_configuration

__all__ = ["Limits", "PlayService", "Session"]

log = logging.getLogger("stratagem.web")


class PlayService(Participants):
    """All server-side state of the play page: sessions, live games, limits, the model worker,
    the games database (joining a study: ``Participants``)."""

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
        study: Study | None = None,
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
            study: consent, participant ids, the operator's token and the configuration every
                row records (``Study()`` when None: no consent screen, and the configuration
                read from ``agent`` itself: ``study.agent_configuration`` without options).
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
        self.study = study or Study()
        self.configuration: dict[str, Any] = {
            "agent": dict(self.study.configuration or agent_configuration(agent_spec, agent)),
            "server": dict(self.study.server),
        }
        # what people are told is part of the condition: two texts are two configurations
        instructions = self.study.consent_sha256
        if instructions is not None:
            self.configuration["instructions_sha256"] = instructions
        self.config_id = configuration_id(
            game.name, game.version, game.params, self.configuration["agent"], instructions
        )
        # game id -> the participant id and consent record its row carries
        self._joined: dict[str, tuple[str | None, dict[str, str] | None]] = {}

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
        pid, consent = (session.participant, session.consent) if session else (None, None)
        if refusal := self.study.refusal(pid, consent):
            raise Forbidden(refusal)
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
            self._joined[human.game_id] = (session.participant, session.consent)
            session.games.append(human.game_id)
            session.live = human.game_id
        with human.lock:
            ask = human.advance()
        self.after_change(human)  # the game's row exists before the model is asked
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
            stored = self.store.status(game_id) if len(game_id) <= 64 else None
            if stored is None:
                raise NotFound("no such game; start a new one")
            raise NotFound(f"this game is no longer here (it is {stored}); start a new one", stored)
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
        """Stores a game that just finished (once), or rewrites the ``live`` row of a game in
        play. A failed write is logged, not raised: the person's move stands, the next change
        writes the row again, and the reaper writes a finished game again once it is idle."""
        if human.done and not human.closed:
            with contextlib.suppress(Exception):
                self.close(human, _ending(human))
            return
        with human.lock:
            if human.closed or human.done:
                return
            try:
                self.store.track(self._record(human, "live"))
            except Exception:
                log.exception("game %s: its live row could not be written", human.game_id[:8])

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
        return True

    def _record(self, human: HumanEpisode, status: Status) -> GameRecord:
        episode = human.episode
        trace = episode.trace()
        meta = {**trace.meta, "config_id": self.config_id}
        if status == "live":  # not over: the row says so until the game ends
            trace = dataclasses.replace(trace, status="error", error=LIVE_ERROR, meta=meta)
        else:
            trace = dataclasses.replace(trace, meta=meta)
        h, m = human.human_seat, human.model_seat
        totals = trace.totals() if status == "finished" else None
        joined = self._joined.get(human.game_id, (None, None))
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
            config_id=self.config_id,
            configuration=self.configuration,
            participant=joined[0],
            consent=joined[1],
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
                    self._joined.pop(human.game_id, None)
            for session in self.sessions.values():
                if session.live is not None and session.live not in self.games:
                    session.live = None  # its game is forgotten: the page starts afresh
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
