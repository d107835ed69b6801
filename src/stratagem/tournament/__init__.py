"""Tournaments: payoff matrices of rule-based strategies and resumable round robins.

``run`` plays them locally (or through any player), ``schedule`` turns episodes into plain-data
matches, and ``ray`` plays those matches on a Ray cluster. The Ray player is not imported here,
so ``import stratagem.tournament`` stays light.
"""

from __future__ import annotations

from stratagem.tournament.run import (
    TournamentResult,
    payoff_matrix,
    round_robin,
    round_robin_specs,
    write_tournament_report,
)

__all__ = [
    "TournamentResult",
    "payoff_matrix",
    "round_robin",
    "round_robin_specs",
    "write_tournament_report",
]
