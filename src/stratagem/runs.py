"""Run folders: resolved config, fingerprint, traces, metrics — resumable and drift-checked.

The fingerprint holds every setting that changes outputs (game and version, agents, seeds,
episode counts, generation parameters). Reopening a folder with a different fingerprint raises
``ConfigDriftError`` naming the keys and touches nothing; runtime settings (progress bars,
concurrency) are stored but may change freely.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigDriftError
from stratagem.trace import Trace, TraceWriter, dumps

MANIFEST = "run.json"
TRACES = "traces.jsonl"


class RunFolder:
    def __init__(
        self,
        path: str | Path,
        fingerprint: Mapping[str, Any],
        runtime: Mapping[str, Any] | None = None,
    ):
        self.path = Path(path)
        self.fingerprint = json.loads(dumps(dict(fingerprint)))
        manifest = self.path / MANIFEST
        self.resumed = manifest.exists()
        if self.resumed:
            stored = json.loads(manifest.read_text())["fingerprint"]
            drift = sorted(
                k
                for k in stored.keys() | self.fingerprint.keys()
                if stored.get(k) != self.fingerprint.get(k)
            )
            if drift:
                details = "; ".join(
                    f"{k}: {stored.get(k)!r} -> {self.fingerprint.get(k)!r}" for k in drift
                )
                raise ConfigDriftError(
                    f"{self.path} was made with other settings ({details}); "
                    "use a new --out folder to start a fresh run"
                )
        self.path.mkdir(parents=True, exist_ok=True)
        self._manifest = {
            "fingerprint": self.fingerprint,
            "runtime": dict(runtime or {}),
            "status": "started",
            "started": _now(),
            "command": sys.argv,
            "versions": _versions(),
        }
        self._write_manifest()

    @property
    def traces_path(self) -> Path:
        return self.path / TRACES

    def writer(self) -> TraceWriter:
        return TraceWriter(self.traces_path)

    def play(
        self,
        game: Any,
        specs: Iterable[Any],
        *,
        max_live: int = 256,
        on_episode: Callable[[Trace], None] | None = None,
    ) -> int:
        """Play every spec not yet in the trace file, appending each trace as it finishes;
        returns how many ended in error (they run again on the next resume)."""
        from stratagem.play import play

        errors = 0
        with self.writer() as writer:
            for trace in play(
                game,
                specs,
                max_live=max_live,
                skip=set(writer.done),
                on_error="record",
                on_finish=on_episode,
            ):
                writer.write(trace)
                errors += trace.status != "complete"
        return errors

    def finish(self, status: str, **counts: Any) -> None:
        self._manifest.update(status=status, finished=_now(), **counts)
        self._write_manifest()

    def _write_manifest(self) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self._manifest, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path / MANIFEST)


def read_fingerprint(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / MANIFEST).read_text())["fingerprint"]


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
