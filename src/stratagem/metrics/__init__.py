"""Metrics: plain functions from traces to ``Estimate(value, stderr, n)``."""

from stratagem.metrics.estimate import Estimate, mean_estimate

__all__ = ["Estimate", "mean_estimate"]
