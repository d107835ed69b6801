"""Rule-based strategies for negotiation v1, pools and SFT mixture (SEPO §4, App. F, H)."""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.agent import Strategy, pure
from stratagem.games.negotiation import DEMANDS, FAIR, PIE, NegotiationView
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("negotiation strategy")


@dataclass(frozen=True)
class FixedDemand(Strategy):
    """Demand the same amount every round."""

    demand: int = FAIR

    def probabilities(self, view: NegotiationView):
        return pure(self.demand)


@STRATEGIES
@dataclass(frozen=True)
class FairSplit(FixedDemand):
    demand: int = 5


@STRATEGIES
@dataclass(frozen=True)
class Balanced(FixedDemand):
    demand: int = 6


@STRATEGIES
@dataclass(frozen=True)
class Hardball(FixedDemand):
    demand: int = 8


@STRATEGIES
@dataclass(frozen=True)
class Selfish(FixedDemand):
    demand: int = 7


@STRATEGIES
@dataclass(frozen=True)
class Accommodating(FixedDemand):
    demand: int = 4


@STRATEGIES
class Concede(Strategy):
    """Demand 8, 7, 6, 5 in rounds 1-4."""

    schedule = (8, 7, 6, 5)

    def probabilities(self, view: NegotiationView):
        return pure(self.schedule[min(view.round, len(self.schedule) - 1)])


@STRATEGIES
class TFTNeg(Strategy):
    """Demand 5 first, then what the opponent's last demand left (10 − it), clipped to 1..9."""

    def probabilities(self, view: NegotiationView):
        if not view.theirs:
            return pure(FAIR)
        return pure(min(max(PIE - view.theirs[-1], DEMANDS[0]), DEMANDS[-1]))


@STRATEGIES
class Random(Strategy):
    def probabilities(self, view: NegotiationView):
        return {d: 1 / len(DEMANDS) for d in DEMANDS}


POOLS = Pools(
    train=("FairSplit", "Balanced", "Concede"),
    exploit=("Selfish", "Hardball"),
    collusive=("Accommodating",),
    robust=("TFTNeg", "Random"),
)
SFT_MIXTURE = {"FairSplit": 0.32, "Balanced": 0.27, "Concede": 0.18, "TFTNeg": 0.15, "Random": 0.08}
