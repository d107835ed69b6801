"""Traces: the machine-readable record of an episode, and the JSONL file they live in.

One JSON line per finished episode, appended and flushed as each episode ends. Reopening a file
resumes it: a torn last line (the process was killed mid-write) is cut off with a warning, errored
episodes are dropped so they run again, and the ids of complete episodes are returned so a run
skips them. Lines are strict JSON: no NaN, no lone surrogates.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from stratagem.errors import ConfigDriftError, ConfigError, shown
from stratagem.game import RoundResult, Seat

SCHEMA_VERSION = 2  # v2: params, system prompts per seat, decision attempts (v1 still reads)
TraceStatus = Literal["complete", "error", "timeout", "limit"]
RETRY_STATUSES = ("error", "timeout")  # dropped on resume, so those episodes run again


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision of one seat, as stored."""

    seat: Seat
    round: int
    action: str
    status: str = "ok"
    text: str | None = None  # raw model output (None for rule-based agents)
    prompt: str | None = None  # the user turn, stored when the agent generated text
    probs: dict[str, float] | None = None
    tokens: int = 0
    seconds: float = 0.0
    info: dict[str, Any] | None = None
    attempt: int = 0  # > 0: an answer given again after a correction


@dataclass(frozen=True, slots=True)
class Trace:
    """The record of one episode. Metrics read traces only."""

    episode_id: str
    game: str
    version: int
    seed: int
    agents: tuple[str, str]  # agent names by seat
    rounds: tuple[RoundResult, ...]
    decisions: tuple[DecisionRecord, ...]
    scenario: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)  # pool, opponent, evaluated seat, index
    status: TraceStatus = "complete"
    error: str | None = None
    schema_version: int = SCHEMA_VERSION
    params: dict[str, Any] = field(default_factory=dict)  # the game's parameters
    system: tuple[str | None, str | None] = (None, None)  # system prompt of each model seat

    def totals(self) -> tuple[float, float]:
        """Summed payoffs by seat."""
        return (
            sum(r.payoffs[0] for r in self.rounds),
            sum(r.payoffs[1] for r in self.rounds),
        )

    def to_json(self) -> str:
        """Returns the trace as one strict JSON line (no newline)."""
        return dumps(asdict(self))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trace:
        """Returns the trace a parsed ``to_json`` line holds (v1 lines, without ``system`` and
        ``params``, included).
        """
        rounds = tuple(
            RoundResult(
                round=r["round"],
                moves=tuple((int(s), str(t)) for s, t in r["moves"]),
                payoffs=(r["payoffs"][0], r["payoffs"][1]),
                info=r.get("info") or {},
            )
            for r in d["rounds"]
        )
        decisions = tuple(DecisionRecord(**x) for x in d["decisions"])
        rest = {k: v for k, v in d.items() if k not in ("rounds", "decisions", "agents", "system")}
        system = d.get("system") or (None, None)  # absent from v1 lines
        return cls(
            rounds=rounds,
            decisions=decisions,
            agents=tuple(d["agents"]),
            system=(system[0], system[1]),
            **rest,
        )

    @classmethod
    def from_json(cls, line: str) -> Trace:
        """Returns the trace one JSON line holds (``from_dict`` of the parsed line)."""
        return cls.from_dict(json.loads(line))


class TraceFileError(ConfigError):
    """A trace file with a line that is not a trace record, or an episode twice."""

    def __init__(
        self,
        path: str | Path,
        number: int,
        what: str,
        fix: str | None = "remove that line (or the file)",
    ):
        super().__init__(f"{path}:{number} {what}" + (f"; {fix} to go on" if fix else ""))


def dumps(obj: Any) -> str:
    """Strict JSON on one line: NaN/inf become null, lone surrogates become U+FFFD."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        text.encode("utf-8")
        return text
    except (ValueError, UnicodeEncodeError):
        return json.dumps(
            _sanitize(obj), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )


def _sanitize(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(obj, Mapping):
        return {_sanitize(k): _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_sanitize(v) for v in obj]
    return obj


class TraceWriter:
    """Append-only JSONL trace file that resumes by episode id.

    Each line is written and flushed when its episode ends, so a killed process loses at most the
    line it was writing (cut off on reopen). ``fsync`` runs every ``fsync_seconds`` and on close:
    that guards against power loss, which SIGKILL is not.
    """

    def __init__(self, path: str | Path, fsync_seconds: float = 1.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync_seconds = fsync_seconds
        self.done: set[str] = set()
        self.dropped_errors = 0
        self._recover()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._last_sync = time.monotonic()

    def _recover(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            warnings.warn(
                f"{self.path}: dropped {len(data) - end} bytes of a torn last record",
                stacklevel=3,
            )
        keep: list[bytes] = []
        for number, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
            try:
                episode, status = read_record(line)
            except ValueError as exc:
                raise TraceFileError(self.path, number, f"is {exc}") from None
            if status in RETRY_STATUSES:
                self.dropped_errors += 1
                continue
            if episode in self.done:
                continue  # a duplicate can only come from a crashed rewrite; keep the first
            self.done.add(episode)
            keep.append(line)
        if end < len(data) or self.dropped_errors:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(b"".join(x + b"\n" for x in keep))
            os.replace(tmp, self.path)

    def write(self, trace: Trace) -> None:
        """Appends ``trace`` as one line and flushes it; a complete (or limit) trace's id joins
        ``done``. Syncs to disk at most every ``fsync_seconds``.
        """
        self._file.write(trace.to_json() + "\n")
        self._file.flush()
        if trace.status not in RETRY_STATUSES:
            self.done.add(trace.episode_id)
        now = time.monotonic()
        if now - self._last_sync >= self.fsync_seconds:
            os.fsync(self._file.fileno())
            self._last_sync = now

    def close(self) -> None:
        """Flushes, syncs to disk and closes the file; closing twice does nothing."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_traces(path: str | Path) -> list[Trace]:
    """Every complete record of a trace file (a torn last line is ignored)."""
    return list(iter_traces(path))


def iter_traces(path: str | Path) -> Iterator[Trace]:
    """Yields every record of a trace file in order, skipping blank lines and a torn last one.

    Raises:
        TraceFileError: a line that holds no trace, by its number.
    """
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if line.endswith("\n") and line.strip():
                try:
                    trace = Trace.from_json(line)
                except (KeyError, IndexError, TypeError, ValueError):
                    raise TraceFileError(path, number, "is not a trace record") from None
                yield trace


def write_traces(path: str | Path, traces: Iterable[Trace]) -> None:
    """Writes ``traces`` to ``path``, one line each, replacing what the file held."""
    with open(path, "w", encoding="utf-8") as f:
        for t in traces:
            f.write(t.to_json() + "\n")


def read_record(line: str | bytes) -> tuple[str, str]:
    """Returns the episode id and status of one trace line, checked against the schema.

    Raises:
        ValueError: the line is no trace record (blank, not JSON, a field missing, unknown or of
            the wrong type), with the reason in a few words and never the line itself.
    """
    from pydantic import ValidationError

    from stratagem.trace.schema import TraceLine

    if not line.strip():
        raise ValueError("a blank line")
    try:
        record = TraceLine.model_validate_json(line)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "json_invalid":
            raise ValueError("not JSON") from None
        where = "".join(f"{x}: " for x in err["loc"][:1])
        raise ValueError(f"not a trace record ({where}{err['msg']})") from None
    return record.episode_id, record.status


def validate_line(line: str):
    """Validate one trace line against the schema (pydantic, unknown fields refused)."""
    from stratagem.trace.schema import TraceLine

    return TraceLine.model_validate_json(line)


def scan_traces(path: Path, key: str | None = None) -> tuple[set[str], set[str]]:
    """Returns (ids of kept episodes, ids of errored ones) of a trace file, checking every line.

    A torn last line (no newline) is ignored: resuming cuts it off. Raises ``TraceFileError``
    for a line before it that is no trace record (``trace.read_record``: blank, not JSON, a
    field missing or of the wrong type) or an id twice among the kept records, and
    ``ConfigDriftError`` for an episode whose id does not start with ``key`` (when given): one
    of a run with other settings.
    """
    done: set[str] = set()
    errors: set[str] = set()
    if not path.exists():
        return done, errors
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                break  # a torn last record
            try:
                episode, status = read_record(line)
            except ValueError as exc:
                raise TraceFileError(path, number, f"is {exc}") from None
            if key is not None and not episode.startswith(f"{key}/"):
                raise ConfigDriftError(
                    f"{path}:{number} holds episode {shown(episode)} of a run with other "
                    f"settings (this run's ids start with {key}/): its run.json was edited or "
                    "another run's traces were copied in; use a new --out folder"
                )
            if status in RETRY_STATUSES:
                errors.add(episode)
            elif episode in done:
                twice = f"repeats episode {shown(episode)}; a trace file holds each episode once"
                raise TraceFileError(path, number, twice + " (two writers?)", None)
            else:
                done.add(episode)
    return done, errors
