"""``metrics.paired``: pairing checked by id, the exact McNemar test and the paired bootstrap
against scipy and by hand on fixed data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from stratagem.metrics.paired import (
    PairingError,
    check_paired,
    mcnemar_exact,
    paired_binary,
    paired_bootstrap,
    paired_mean,
)

BEFORE = [7.0, 3.0, 5.0, 9.0, 2.0, 8.0, 6.0, 4.0, 10.0, 5.0, 6.5, 0.0]
AFTER = [8.0, 5.0, 5.0, 10.0, 4.0, 7.0, 9.0, 6.0, 10.0, 8.0, 6.0, 3.5]


def test_sides_that_played_the_same_games_pass():
    check_paired(["a", "b", "c"], ["a", "b", "c"])
    check_paired([], [])


def test_a_deliberate_mismatch_is_refused_naming_the_first_one():
    ids = [f"context {k}" for k in range(6)]
    swapped = ids[:2] + ["context 9", "context 8"] + ids[4:]
    with pytest.raises(PairingError) as e:
        check_paired(ids, swapped)
    assert str(e.value) == (
        "not paired: game 2 is 'context 2' in the first side and 'context 9' in the second (6 "
        "and 6 games); a paired statistic needs the same games on both sides"
    )
    with pytest.raises(
        PairingError,
        match=r"episode 3 is 'context 3' in the first side and none in the second \(5 and 3 ",
    ):
        check_paired(ids[:5], ids[:3], what="episode")
    with pytest.raises(PairingError, match="game 0 is 1 in a and 2 in b"):
        check_paired([1], [2], sides=("a", "b"))


def booleans(pairs: list[tuple[bool, bool]]) -> tuple[list[bool], list[bool]]:
    return [a for a, _ in pairs], [b for _, b in pairs]


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_games():
    # 18 games gained (no -> yes), 10 lost (yes -> no), 60 concordant either way
    a, b = booleans(
        [(False, True)] * 18 + [(True, False)] * 10 + [(True, True)] * 5 + [(False,) * 2] * 55
    )
    gained, lost, p = mcnemar_exact(a, b)
    assert (gained, lost) == (18, 10)
    by_hand = 2 * sum(math.comb(28, k) for k in range(11)) / 2**28  # two-sided, symmetric
    assert p == pytest.approx(by_hand, rel=1e-12) and p == pytest.approx(0.185, abs=5e-4)
    assert p == pytest.approx(stats.binomtest(18, 28, 0.5).pvalue, rel=1e-12)
    assert mcnemar_exact(b, a) == (10, 18, pytest.approx(p))  # the sides swapped
    # an unequal split of odd total: scipy's two-sided exact p
    a, b = booleans([(False, True)] * 7 + [(True, False)] * 2 + [(True, True)] * 3)
    assert mcnemar_exact(a, b) == (7, 2, pytest.approx(stats.binomtest(7, 9).pvalue))
    assert mcnemar_exact(a, b)[2] == pytest.approx(2 * (1 + 9 + 36) / 2**9)
    assert mcnemar_exact([True, False], [True, False]) == (0, 0, 1.0)  # nothing discordant


def test_the_paired_bootstrap_is_scipys_on_the_pairs():
    low, high = paired_bootstrap(BEFORE, AFTER, seed=3)
    expected = stats.bootstrap(
        (np.array(BEFORE), np.array(AFTER)),
        lambda x, y, axis=-1: np.mean(y - x, axis=axis),
        paired=True,
        confidence_level=0.95,
        method="BCa",
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert (low, high) == (pytest.approx(expected.low), pytest.approx(expected.high))
    mean = np.mean(np.array(AFTER) - np.array(BEFORE))
    assert low < mean < high
    assert paired_bootstrap(BEFORE, AFTER, seed=3) == (low, high)  # seeded: the same again
    narrow = paired_bootstrap(BEFORE, AFTER, confidence=0.5, seed=3)
    assert low < narrow[0] < narrow[1] < high
    assert paired_bootstrap([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]) == (1.0, 1.0)  # constant: a point
    assert paired_bootstrap([1.0], [3.5]) == (2.5, 2.5)


def test_paired_mean_and_binary_report_the_standard_error_beside():
    change = paired_mean(BEFORE, AFTER)
    diff = [b - a for a, b in zip(BEFORE, AFTER, strict=True)]
    assert change.change.n == 12 and change.change.value == pytest.approx(sum(diff) / 12)
    assert change.change.stderr == pytest.approx(float(np.std(diff, ddof=1) / math.sqrt(12)))
    assert (change.low, change.high) == paired_bootstrap(BEFORE, AFTER)
    assert str(change) == (
        f"+{change.change.value:.2f} ± {change.change.stderr:.2f} "
        f"[{change.low:+.2f}, {change.high:+.2f}]"
    )
    a, b = booleans([(False, True)] * 3 + [(True, False)] + [(True, True)] * 4)
    binary = paired_binary(a, b)
    assert (binary.gained, binary.lost) == (3, 1) and binary.change.value == pytest.approx(0.25)
    assert binary.p == pytest.approx(0.625) and str(binary) == "+0.250 (3 vs 1, p 0.62)"


def test_unpaired_or_empty_sides_are_refused():
    with pytest.raises(PairingError, match="3 values on one side and 2"):
        paired_bootstrap([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(PairingError, match="no pairs"):
        mcnemar_exact([], [])
    with pytest.raises(PairingError, match="2 values on one side and 1"):
        paired_mean([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap(BEFORE, AFTER, confidence=95)
