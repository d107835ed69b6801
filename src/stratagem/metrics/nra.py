"""Normalised relative advantage (GTBench), from traces.

For each opponent o: ``(Σ pay_agent − Σ pay_o) / (Σ pay_agent + Σ pay_o)`` with the sums over all
rounds of all episodes against o (0 when the denominator is 0); NRA is the mean over opponents.
Zero-sum games shift every round's payoffs by ``shift`` (Kuhn: +2 per hand) so the sums are
non-negative. The error is a seeded bootstrap over episodes within each opponent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from stratagem.metrics.estimate import Estimate
from stratagem.trace import Trace

BOOTSTRAP_SAMPLES = 200


def _ratio(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    total = mine + theirs
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total != 0, (mine - theirs) / np.where(total == 0, 1, total), 0.0)


def nra(traces: Sequence[Trace], shift: float = 0.0, seed: int = 0) -> Estimate:
    """Returns the agent's NRA over the complete traces, with a bootstrap standard error.

    ``shift`` is added to each round's payoffs; ``seed`` seeds the bootstrap. Each trace's opponent
    is ``meta["opponent"]`` (else the other seat's agent); NRA is 0 with n = 0 when no trace is
    complete.
    """
    sums: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for t in traces:
        if t.status != "complete":
            continue
        s = int(t.meta.get("seat", 0))
        mine = sum(r.payoffs[s] + shift for r in t.rounds)
        theirs = sum(r.payoffs[1 - s] + shift for r in t.rounds)
        sums[t.meta.get("opponent", t.agents[1 - s])].append((mine, theirs))
    return nra_from_sums(sums, seed)


def nra_from_sums(sums: Mapping[str, list[tuple[float, float]]], seed: int = 0) -> Estimate:
    """Returns NRA from per-opponent lists of (agent sum, opponent sum) per episode, in order
    (the bootstrap draws episodes in that order); 0 with n = 0 when there are none."""
    if not sums:
        return Estimate(0.0, 0.0, 0)
    rng = np.random.default_rng(seed)
    values, boots = [], []
    for pairs in sums.values():
        arr = np.asarray(pairs)  # (episodes, 2)
        values.append(float(_ratio(arr[:, 0].sum(), arr[:, 1].sum())))
        idx = rng.integers(0, len(arr), size=(BOOTSTRAP_SAMPLES, len(arr)))
        sample = arr[idx].sum(axis=1)  # (B, 2)
        boots.append(_ratio(sample[:, 0], sample[:, 1]))
    stderr = float(np.mean(boots, axis=0).std(ddof=1)) if len(boots[0]) > 1 else 0.0
    n = sum(len(p) for p in sums.values())
    return Estimate(float(np.mean(values)), stderr, n)
