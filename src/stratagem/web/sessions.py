"""The play page's sessions and the study's side of them: ``Limits`` (rate limits and bounds),
``Session`` (one browser, for one participant) and ``Participants``, the part of ``PlayService``
that joins a person to a study (their participant id and consent) and says what the page shows
of it.

A new participant id in a session that belongs to someone already (it has an id, a game or a
consent) is another person: they get a new session, so consent, games and the screen are never
carried from one person to the next on a shared computer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stratagem.web.episodes import Busy, HumanEpisode
from stratagem.web.issued import issued_id
from stratagem.web.security import new_id
from stratagem.web.storage import GameStore, now_iso
from stratagem.web.study import Study, participant_id

if TYPE_CHECKING:
    from stratagem.game import Game
    from stratagem.web.records import Status


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
    joins_per_hour: int = 30  # participant ids and consents one session sends (POST /api/study)
    joins_per_hour_ip: int = 120  # of one IP address, all its sessions together
    idle_seconds: float = 900.0  # a live game untouched this long is stored as abandoned
    model_timeout: float | None = 120.0  # seconds the model may take for a turn; then a retry
    max_body_bytes: int = 16_384
    cookie_seconds: int = 7 * 24 * 3600


@dataclass
class Session:
    """One browser's games (its cookie names it)."""

    id: str
    games: list[str] = field(default_factory=list)
    # the game the page shows: the one in play, or the last one, ended, until another starts
    # or it is forgotten (so a reload still shows its result)
    live: str | None = None
    touched: float = field(default_factory=time.monotonic)
    participant: str | None = None  # the study's participant id, once given
    # this participant's acceptance of the study's terms: {"sha256": of the text, "at": when}
    consent: dict[str, str] | None = None


class Participants:
    """Joining a study, for ``PlayService`` (which holds every attribute named here)."""

    game: Game
    config_id: str
    key: bytes
    study: Study
    store: GameStore
    limits: Limits
    clock: Callable[[], float]
    sessions: dict[str, Session]
    games: dict[str, HumanEpisode]
    _lock: threading.Lock

    if TYPE_CHECKING:  # PlayService's own

        def check_limit(self, key: str, limit: int, window: float) -> None:
            """Counts one hit of ``key``; raises ``Limited`` past ``limit`` per ``window``."""

        def close(self, human: HumanEpisode, status: Status) -> bool:
            """Stores ``human`` as ended; False when it was stored already."""

    def join(
        self,
        session: Session | None,
        ip: str,
        participant: Any,
        consent: bool,
        leave: bool = False,
    ) -> Session:
        """Records a person's participant id (None keeps the one given) and their consent to
        the study's text shown now; returns their session. A new id in a session that has an id,
        a game or a consent already is another person: they get a new session (without the
        previous one's consent, games or screen), so the caller sets its cookie.

        Args:
            session: the request's session (None: a new one).
            ip: the request's address (rate limits).
            participant: the id given, unchecked (None: keep the session's).
            consent: whether the person accepted the text shown.
            leave: abandon the game in play of the session's previous participant first.

        Raises:
            InputError: a malformed participant id.
            Forbidden: with issued ids, an id without its code (or with another).
            Busy: a new participant id while the session has a game in play (without ``leave``).
            Limited: the session or the address sent too many joins, or the address started too
                many sessions, lately (every attempt counts, a refused one too: probing ids or
                codes is slow).
        """
        if session is not None:
            self.check_limit(f"joins:{session.id}", self.limits.joins_per_hour, 3600.0)
        self.check_limit(f"joins-ip:{ip}", self.limits.joins_per_hour_ip, 3600.0)
        pid = self._participant(participant)
        with self._lock:
            changed = session is not None and pid is not None and pid != session.participant
            playing = self.games.get(session.live) if session and session.live else None
            if playing is not None and playing.closed:
                playing = None
        if changed and playing is not None and session is not None:
            if not leave:
                raise Busy(
                    f"participant {session.participant} has a game in play in this browser: "
                    f"finish or leave it before starting as {pid}"
                )
            self.close(playing, "abandoned")
        if session is not None and changed and _used(session):
            session = None  # another person: their own session
        if session is None:
            self.check_limit(f"sessions-ip:{ip}", self.limits.games_per_hour_ip, 3600.0)
        with self._lock:
            if session is None:
                session = Session(new_id(), touched=self.clock())
                self.sessions[session.id] = session
            if pid is not None:
                session.participant = pid
            study = self.study
            if consent and study.consent is not None and not study.consented(session.consent):
                session.consent = {"sha256": str(study.consent_sha256), "at": now_iso()}
        return session

    def _participant(self, value: Any) -> str | None:
        """The participant id ``value`` names (None: none given); see ``join``."""
        if value is None:
            return None
        return issued_id(self.key, value) if self.study.issued_ids else participant_id(value)

    def study_state(self, session: Session | None) -> dict[str, Any]:
        """Returns what the page shows of the study for ``session`` (``Study.state``): the
        participant's games across browsers when ids are issued (the code proves who they are),
        else the session's own games only (an id that is a mere name reveals nothing of others'
        games)."""
        pid, consent = (session.participant, session.consent) if session else (None, None)
        with self._lock:
            current = self.games.get(session.live) if session and session.live else None
        everywhere = pid if self.study.issued_ids else None
        games = session.games if session else []
        tally = self.store.tally(self.game.name, everywhere, games, config_id=self.config_id)
        pending = current is not None and current.done and not current.closed
        return self.study.state(pid, consent, tally, pending)


def _used(session: Session) -> bool:
    """Whether ``session`` belongs to someone already: it has an id, a game or a consent."""
    return session.participant is not None or bool(session.games) or session.consent is not None
