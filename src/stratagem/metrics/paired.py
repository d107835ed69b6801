"""Paired comparisons: two sides (a run's start and a later checkpoint, two runs) scored on the
same games, compared game by game.

A paired statistic is only as good as its pairing: each function here that pairs takes its
sides in game order, and ``check_paired`` refuses two sides that did not play the same games
(by a game or context id), naming the first game where they part. On paired sides:

- ``paired_mean``: the mean of the differences ``b - a`` with its standard error (the
  ``Estimate`` every metric reports) and a paired bootstrap interval (``paired_bootstrap``).
- ``mcnemar_exact``: for a yes/no outcome (a joint-best deal, an agreement), the discordant
  games either way and the exact two-sided McNemar p-value: the binomial test of one count
  against their sum at one half, what the normal approximation misreads at the few dozen
  discordant games a CPU run has.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from stratagem.errors import StratagemError
from stratagem.metrics.estimate import Estimate, mean_estimate

CONFIDENCE = 0.95
RESAMPLES = 9999  # scipy's default: the interval's ends vary by well under its width


class PairingError(StratagemError, ValueError):
    """Two sides of a paired comparison that did not play the same games."""


def check_paired(
    ids_a: Sequence[Hashable],
    ids_b: Sequence[Hashable],
    what: str = "game",
    sides: tuple[str, str] = ("the first side", "the second"),
) -> None:
    """Checks that two sides played the same games in the same order: ``ids_a[i] == ids_b[i]``
    for every ``i`` and as many on each side.

    Raises:
        PairingError: the first index where they differ, with both ids (``none`` where one side
            has no game there), each side named as in ``sides``.
    """
    for i in range(max(len(ids_a), len(ids_b))):
        a = ids_a[i] if i < len(ids_a) else None
        b = ids_b[i] if i < len(ids_b) else None
        if a is None or b is None or a != b:
            raise PairingError(
                f"not paired: {what} {i} is {_shown(a)} in {sides[0]} and {_shown(b)} in "
                f"{sides[1]} ({len(ids_a)} and {len(ids_b)} {what}s); a paired statistic needs "
                "the same games on both sides"
            )


def _shown(x: Hashable | None) -> str:
    return "none" if x is None else repr(x) if not isinstance(x, str) else f"'{x}'"


def _same_length(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise PairingError(f"not paired: {len(a)} values on one side and {len(b)} on the other")
    if not a:
        raise PairingError("no pairs to compare")


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, float]:
    """The exact McNemar test of a yes/no outcome on paired games.

    Returns ``(b01, b10, p)``: games no on side ``a`` and yes on ``b``, games yes on ``a`` and
    no on ``b``, and the two-sided exact p-value (``scipy.stats.binomtest(b01, b01 + b10,
    0.5)``; 1 with no discordant game).

    Raises:
        PairingError: the sides differ in length, or are empty.
    """
    from scipy.stats import binomtest

    _same_length(a, b)
    b01 = sum(1 for x, y in zip(a, b, strict=True) if not x and y)
    b10 = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    p = 1.0 if b01 + b10 == 0 else float(binomtest(b01, b01 + b10, 0.5).pvalue)
    return b01, b10, p


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float]:
    """The bootstrap interval of the mean of ``b - a`` over paired games: the games resampled
    as pairs (``scipy.stats.bootstrap`` of the differences, BCa, seeded by ``seed``).

    Differences that are all equal give the point ``(d, d)`` (nothing to resample; BCa would
    give NaN), as does a single pair.

    Raises:
        PairingError: the sides differ in length, or are empty.
        ValueError: ``confidence`` is not strictly between 0 and 1.
    """
    import numpy as np
    from scipy.stats import bootstrap

    _same_length(a, b)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if np.all(diff == diff[0]):
        return float(diff[0]), float(diff[0])
    result = bootstrap(
        (diff,),
        np.mean,
        n_resamples=RESAMPLES,
        confidence_level=confidence,
        method="BCa",
        rng=np.random.default_rng(seed),
    )
    # BCa is undefined only for a constant sample (every resample at the estimate), taken above
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return low, high


@dataclass(frozen=True, slots=True)
class PairedMean:
    """The mean change ``b - a`` over paired games: value ± standard error (over n pairs) and
    its paired bootstrap interval."""

    change: Estimate
    low: float
    high: float

    def __str__(self) -> str:
        interval = f"[{self.low:+.2f}, {self.high:+.2f}]"
        return f"{self.change.value:+.2f} ± {self.change.stderr:.2f} {interval}"


@dataclass(frozen=True, slots=True)
class PairedBinary:
    """A yes/no outcome over paired games: the change of its rate ``b - a`` (± standard error)
    and the exact McNemar test on the discordant games (``gained``: no → yes, ``lost``: yes →
    no)."""

    change: Estimate
    gained: int
    lost: int
    p: float

    def __str__(self) -> str:
        return f"{self.change.value:+.3f} ({self.gained} vs {self.lost}, p {self.p:.2f})"


def paired_mean(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE, seed: int = 0
) -> PairedMean:
    """``b - a`` game by game: its mean ± standard error and ``paired_bootstrap`` interval.

    Raises:
        PairingError: the sides differ in length, or are empty.
    """
    _same_length(a, b)
    change = mean_estimate([y - x for x, y in zip(a, b, strict=True)])
    return PairedMean(change, *paired_bootstrap(a, b, confidence, seed))


def paired_binary(a: Sequence[bool], b: Sequence[bool]) -> PairedBinary:
    """A yes/no outcome's change of rate (± standard error) with ``mcnemar_exact``.

    Raises:
        PairingError: the sides differ in length, or are empty.
    """
    gained, lost, p = mcnemar_exact(a, b)
    change = mean_estimate([float(y) - float(x) for x, y in zip(a, b, strict=True)])
    return PairedBinary(change, gained, lost, p)
