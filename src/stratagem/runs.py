"""Run folders: resolved config, fingerprint, traces, metrics — one writer, resumable, checked.

The fingerprint holds every setting that changes outputs (game, version and params, agents,
seeds, episode counts, generation parameters). A run folder promises (RELIABILITY A1–A9):

- **one writer**: a run holds an exclusive ``flock`` on the folder itself for its whole life (so
  deleting ``run.lock``, which only names the holder, lets no second writer in); a second
  process on the same folder is refused with the holder's pid and command;
- **no reuse under the wrong label**: every episode id starts with the fingerprint's key, and
  every trace line is checked to carry this run's key, so traces of other settings are never
  taken for this run's, whatever ``run.json`` says (missing, corrupt or edited);
- **drift refused**: reopening a folder with another fingerprint raises ``ConfigDriftError``
  naming the keys and touches nothing; runtime settings (concurrency, progress bars) may change.
  Paths enter fingerprints resolved (``settings.normal_path``): a folder named two ways is one;
- **a trace file that reads back exactly**: a line before the last that is no trace record
  (blank, not JSON, a field missing or of the wrong type), and duplicate episode ids, are refused
  with the line number (a torn *last* line is a killed write and is cut off on resume);
- **a status that tells the truth**: ``started``, then ``complete``, ``partial`` (some episodes
  failed; a rerun retries them), ``error`` (none completed) or ``interrupted``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigDriftError, ConfigError, StratagemError, shown
from stratagem.settings import check_folder_text, normal_paths
from stratagem.trace import (  # noqa: F401 (TraceFileError, scan_traces: imported from here)
    Trace,
    TraceFileError,
    TraceWriter,
    dumps,
    scan_traces,
)

MANIFEST = "run.json"
TRACES = "traces.jsonl"
LOCK = "run.lock"
INPUTS = "inputs"  # copies of the files a game read (``game.HasInputFiles``), by parameter

# plays episode specs like ``stratagem.play.play`` (same arguments), yielding traces
Player = Callable[..., Iterator[Trace]]


class RunFolderError(StratagemError):
    """The run folder cannot be used: a filesystem failure (unwritable, full disk) or a folder
    another process holds. Exit code 1 for runtime failures; 2 where the user must change the
    command."""

    exit_code = 1


class RunLockedError(RunFolderError):
    """Another process is writing this run folder."""

    exit_code = 2


def fingerprint_key(fingerprint: Mapping[str, Any]) -> str:
    """Returns the 12-hex-digit key of a fingerprint: the prefix of every episode id of a run."""
    text = json.dumps(json.loads(dumps(dict(fingerprint))), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fresh_folder(base: str | Path) -> Path:
    """Creates and returns a new folder named ``base`` + a timestamp, unique even when several
    processes ask in the same second (``mkdir`` is atomic; a clash takes the next suffix)."""
    base = Path(base)
    stamp = time.strftime("-%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        path = base.with_name(base.name + stamp + ("" if n == 1 else f"-{n}"))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise _fs_error(exc, path) from None
    raise RunFolderError(f"could not create a fresh folder next to {base}")


def check_out_path(path: str | Path) -> Path:
    """Returns ``path`` as a run folder location, or raises a one-line ``ConfigError`` for one
    that cannot be a folder (empty, not UTF-8, a file, under a file, a device)."""
    check_folder_text(str(path))
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file, not a folder; choose a folder")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise ConfigError(f"--out {path} is under {parent}, which is a file")
    return path


class RunFolder:
    """One run's folder, held by this process until ``close`` (or the process ends)."""

    def __init__(
        self,
        path: str | Path,
        fingerprint: Mapping[str, Any],
        runtime: Mapping[str, Any] | None = None,
    ):
        """Open (or create) the run folder at ``path`` for ``fingerprint``.

        Raises:
            ConfigError: ``path`` cannot be a folder, the traces hold a bad line or a duplicate.
            ConfigDriftError: the folder was made with other settings.
            RunLockedError: another process holds the folder.
            RunFolderError: the filesystem refused (permissions, read-only, full disk).
        """
        self.path = check_out_path(path)
        self.fingerprint = json.loads(dumps(dict(fingerprint)))
        self.key = fingerprint_key(self.fingerprint)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _fs_error(exc, self.path) from None
        self._lock: int | None = self._acquire()  # None once released
        try:
            stored = self._stored_manifest()
            if stored is not None:
                self._check_drift(stored["fingerprint"])
            done, _ = scan_traces(self.traces_path, self.key)
            self.resumed = bool(done)
            self._manifest = {
                "fingerprint": self.fingerprint,
                "key": self.key,
                "runtime": dict(runtime or {}),
                "status": "started",
                "started": _now(),
                "command": sys.argv,
                "versions": _versions(),
            }
            self._sign_lock()
            self._write_manifest()
        except BaseException:
            self.close()
            raise

    @property
    def traces_path(self) -> Path:
        """The run's trace file."""
        return self.path / TRACES

    def writer(self) -> TraceWriter:
        """Returns the append-only writer of the run's trace file (resuming it)."""
        try:
            return TraceWriter(self.traces_path)
        except OSError as exc:
            raise _fs_error(exc, self.traces_path) from None

    def play(
        self,
        game: Any,
        specs: Iterable[Any],
        *,
        max_live: int = 256,
        on_episode: Callable[[Trace], None] | None = None,
        player: Player | None = None,
    ) -> int:
        """Play every spec not yet in the trace file, appending each trace as it finishes;
        returns how many ended in error (they run again on the next resume).

        Episode ids are prefixed with the fingerprint key. ``player`` plays the keyed specs
        (default: the local scheduler ``play``; ``tournament.ray.RayPlayer`` plays them on Ray): it
        takes ``play``'s arguments and yields traces, and this process alone writes them, so the
        lock, resume and exactly-once hold whoever plays. An interruption (Ctrl-C, SIGTERM)
        marks the run ``interrupted`` before it propagates.
        """
        from stratagem.play import play

        player = player or play
        prefix = f"{self.key}/"
        keyed = (dataclasses.replace(s, episode_id=prefix + s.episode_id) for s in specs)
        errors = 0
        try:
            with self.writer() as writer:
                for trace in player(
                    game,
                    keyed,
                    max_live=max_live,
                    skip=set(writer.done),
                    on_error="record",
                    on_finish=on_episode,
                ):
                    writer.write(trace)
                    errors += trace.status != "complete"
        except OSError as exc:  # a full disk, a folder gone read-only: finished lines are kept
            raise _fs_error(exc, self.traces_path) from None
        except (KeyboardInterrupt, SystemExit) as exc:
            self.finish("interrupted")
            vars(exc)["run_folder"] = self.path  # the resume hint names this folder
            raise
        return errors

    def keep_inputs(self, files: Mapping[str, str]) -> None:
        """Copies each file the game read to ``inputs/<parameter>``: the folder alone suffices."""
        for param, source in files.items():
            target = self.path / INPUTS / param
            try:
                target.parent.mkdir(exist_ok=True)
                target.with_suffix(".tmp").write_bytes(Path(source).read_bytes())
                os.replace(target.with_suffix(".tmp"), target)
            except OSError as exc:
                raise _fs_error(exc, target) from None

    def finish(self, status: str, **counts: Any) -> None:
        """Record the run's final ``status`` (and counts) in ``run.json``."""
        self._manifest.update(status=status, finished=_now(), **counts)
        self._write_manifest()

    def close(self) -> None:
        """Release the folder's lock (the process ending releases it too)."""
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock, fcntl.LOCK_UN)
                os.close(self._lock)
            self._lock = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if isinstance(exc, Exception) and self._manifest.get("status") == "started":
            # a run stopped by an error says so instead of staying "started" for ever
            with contextlib.suppress(StratagemError, OSError):
                self.finish("error", error=f"{type(exc).__name__}: {exc}")
        self.close()

    def _acquire(self) -> int:
        """Lock the folder itself (a descriptor on the directory): no file in it, ``run.lock``
        included, can be deleted to let a second writer in."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise _fs_error(exc, self.path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            try:
                holder = (self.path / LOCK).read_bytes()[:4096].decode("utf-8", "replace")
            except OSError:
                holder = ""
            raise RunLockedError(
                f"{self.path} is in use by {holder.strip() or 'another process'}; wait for it to "
                "finish or choose another --out"
            ) from None
        return fd

    def _sign_lock(self) -> None:
        """Write this process into ``run.lock`` (after the checks: a refused run touches
        nothing), so a second process can name the holder."""
        line = f"pid {os.getpid()} ({' '.join(sys.argv)})"
        try:
            (self.path / LOCK).write_bytes(line.encode("utf-8", "backslashreplace"))
        except OSError as exc:
            raise _fs_error(exc, self.path / LOCK) from None

    def _stored_manifest(self) -> dict[str, Any] | None:
        """Returns the stored manifest, or None when it is missing, empty or corrupt."""
        manifest = self.path / MANIFEST
        try:
            stored = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(stored, dict) or not isinstance(stored.get("fingerprint"), dict):
            return None
        return stored

    def _check_drift(self, stored: Mapping[str, Any]) -> None:
        """Refuse a stored fingerprint other than this run's; one naming the same paths relative
        (as older versions stored them) is kept, with its key: the folder's episodes stay ours."""
        drift = sorted(
            k
            for k in stored.keys() | self.fingerprint.keys()
            if not _same(stored.get(k), self.fingerprint.get(k))
        )
        if drift:
            details = "; ".join(_drift(k, stored.get(k), self.fingerprint.get(k)) for k in drift)
            raise ConfigDriftError(
                f"{self.path} was made with other settings ({details}); "
                "use a new --out folder to start a fresh run"
            )
        self.fingerprint, self.key = dict(stored), fingerprint_key(stored)

    def _write_manifest(self) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        try:
            tmp.write_text(json.dumps(self._manifest, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, self.path / MANIFEST)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise _fs_error(exc, self.path / MANIFEST) from None


def _drift(key: str, old: Any, new: Any) -> str:
    """``key: old -> new`` (each value quoted short); for two mappings, each entry that differs
    (``game_params.x: ...``)."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if not _same(old.get(k), new.get(k)))
        return "; ".join(_drift(f"{key}.{k}", old.get(k), new.get(k)) for k in keys)
    return f"{key}: {shown(old)} -> {shown(new)}"


def stored_inputs(path: str | Path) -> dict[str, str]:
    """The copies ``RunFolder.keep_inputs`` made in the run folder ``path``, by parameter."""
    folder = Path(path) / INPUTS
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return {f.name: str(f) for f in files if f.suffix != ".tmp"}


def read_fingerprint(path: str | Path) -> dict[str, Any]:
    """Returns the fingerprint stored in a run folder's ``run.json``.

    Raises ``ConfigError`` when the folder has no readable ``run.json``.
    """
    manifest = Path(path) / MANIFEST
    try:
        return json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{path} has no readable {MANIFEST}; pass a run folder written by stratagem"
        ) from None


def _same(stored: Any, new: Any) -> bool:
    """Whether a stored fingerprint value equals the new one, a relative path (or comma list)
    stored as typed by older versions being equal to its resolution from here."""
    if isinstance(stored, dict) and isinstance(new, dict):
        return stored.keys() == new.keys() and all(_same(stored[k], new[k]) for k in stored)
    if isinstance(stored, list) and isinstance(new, list):
        return len(stored) == len(new) and all(map(_same, stored, new))
    if isinstance(stored, str) and isinstance(new, str) and stored != new:
        return new.startswith("/") and not stored.startswith("/") and normal_paths(stored) == new
    return bool(stored == new)


def _fs_error(exc: OSError, path: Path) -> RunFolderError:
    """One line for a filesystem failure at ``path``."""
    reason = {
        errno.ENOSPC: "the disk is full",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "the filesystem is read-only",
        errno.ENOTDIR: "a part of the path is a file",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return RunFolderError(f"cannot write {path}: {reason}; finished episodes are kept")


def _versions() -> dict[str, str | None]:
    """Versions of the packages that shape results (those not imported are looked up, not
    imported)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in ("stratagem", "torch", "transformers", "peft", "trl", "openai"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
