"""Starting and restarting runs from the command line: the size guard a run passes before it
starts, and the command that resumes one that was interrupted.

A run far beyond what the machine can finish (``--episodes 1000000000``) is not started
silently: beyond ``LARGE_RUN`` episodes it prints an estimate (episodes, the disk its traces
take and whether the disk has that much free) and goes on only with ``--yes`` or a yes typed on
a terminal; elsewhere (a script, a pipe) it is refused with the estimate and how to force it.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.runs import TRACES

LARGE_RUN = 1_000_000  # episodes: a bigger run starts only when confirmed
TRACE_BYTES = 4_000  # bytes per episode when the folder has no traces to measure (IPD: ~3.8 KB)
SAMPLE_BYTES = 1 << 20  # how much of an existing trace file is read to measure its lines


def check_size(
    episodes: int,
    folder: Path,
    *,
    yes: bool = False,
    ask: Callable[[str], bool] | None = None,
) -> None:
    """Refuse to start a run of ``episodes`` in ``folder`` that is far beyond what the machine
    can finish, unless confirmed.

    Args:
        episodes: every episode the run plays (those already in the folder included).
        folder: the run folder (it may not exist yet).
        yes: go on without asking (``--yes``).
        ask: asks the user a yes/no question; default: on a terminal, a prompt on stderr; not on
            a terminal, no one to ask.

    Raises:
        ConfigError: the run is beyond ``LARGE_RUN`` episodes and was not confirmed: one line
            with the estimate and how to force it.
    """
    if yes or episodes <= LARGE_RUN:
        return
    per_episode = _bytes_per_episode(folder / TRACES)
    need = max(episodes * per_episode - _size_of(folder / TRACES), 0)
    free = shutil.disk_usage(_existing(folder)).free
    what = (
        f"this run plays {episodes:,} episodes, about {_human(episodes * per_episode)} of traces "
        f"(~{_human(per_episode)} each)"
    )
    if need > free:
        what += f", more than the {_human(free)} free on its disk"
    if ask is None and sys.stdin.isatty() and sys.stderr.isatty():
        ask = _ask_terminal
    if ask is not None and ask(f"{what}. Start it? [y/N] "):
        return
    raise ConfigError(
        f"{what}; a run beyond {LARGE_RUN:,} episodes starts only when asked: add --yes to start it"
    )


def resume_command(argv: Sequence[str], folder: Path | None, options: Mapping[str, Any]) -> str:
    """Returns the shell-quoted command that resumes an interrupted run: ``argv`` as typed, or,
    for a run that made a fresh folder (``--new-run`` given, or a config file that may say so;
    ``options`` are the command's options as typed, None where not given), one naming that
    ``folder``: the command as typed would start yet another fresh folder."""
    new_run = options.get("new_run", False)
    if folder is None or new_run is False or not (new_run or options.get("config")):
        return shlex.join(["stratagem", *argv[1:]])
    kept: list[str] = []
    value_next = False
    for arg in argv[1:]:
        if not value_next and arg not in ("--new-run", "--no-new-run", "--out", "-o"):
            if not arg.startswith(("--out=", "-o")):
                kept.append(arg)
        value_next = not value_next and arg in ("--out", "-o")
    return shlex.join(["stratagem", *kept, "--no-new-run", "--out", str(folder)])


def _bytes_per_episode(traces: Path) -> int:
    """The mean line of the first ``SAMPLE_BYTES`` of an existing trace file, else
    ``TRACE_BYTES``."""
    try:
        with open(traces, "rb") as f:
            sample = f.read(SAMPLE_BYTES)
    except OSError:
        return TRACE_BYTES
    lines = sample.count(b"\n")
    return len(sample[: sample.rfind(b"\n") + 1]) // lines if lines else TRACE_BYTES


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _existing(folder: Path) -> Path:
    """``folder`` or its nearest existing parent (whose disk the run will write to)."""
    for path in (folder, *folder.absolute().parents):
        if path.is_dir():
            return path
    return Path("/")


def _human(size: float) -> str:
    if size < 1000:
        return f"{size:.0f} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        size /= 1000
        if size < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:.1f} PB"


def _ask_terminal(question: str) -> bool:
    sys.stderr.write(question)
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")
