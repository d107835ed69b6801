"""A metric value with its standard error and the number of episodes behind it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Estimate:
    """A metric's value, its standard error and the number of episodes behind it."""

    value: float
    stderr: float
    n: int  # episodes (or, where stated, opponents) it was computed from

    def __str__(self) -> str:
        return f"{self.value:.3f} ± {self.stderr:.3f}"

    def scaled(self, factor: float) -> Estimate:
        """Returns the estimate with value and standard error multiplied by ``factor``."""
        return Estimate(self.value * factor, self.stderr * abs(factor), self.n)


def mean_estimate(xs: Sequence[float]) -> Estimate:
    """Mean with the standard error of the mean (sample std / √n; 0 for fewer than 2 values)."""
    n = len(xs)
    if n == 0:
        return Estimate(0.0, 0.0, 0)
    mean = math.fsum(xs) / n
    if n < 2:
        return Estimate(mean, 0.0, n)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return Estimate(mean, math.sqrt(var / n), n)


def combine(terms: Sequence[tuple[float, Estimate]], n: int) -> Estimate:
    """Σ wᵢ·xᵢ with the error of independent terms: √Σ (wᵢ·seᵢ)²."""
    value = math.fsum(w * e.value for w, e in terms)
    stderr = math.sqrt(math.fsum((w * e.stderr) ** 2 for w, e in terms))
    return Estimate(value, stderr, n)
