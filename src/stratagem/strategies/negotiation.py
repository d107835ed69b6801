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
    """Demands ``demand`` every round, whatever the opponent does.

    The base of the fixed demanders below; not registered itself.
    """

    demand: int = FAIR

    def probabilities(self, view: NegotiationView):
        """Returns ``demand`` for sure."""
        return pure(self.demand)


@STRATEGIES
@dataclass(frozen=True)
class FairSplit(FixedDemand):
    """Demands 5 every round."""

    demand: int = 5


@STRATEGIES
@dataclass(frozen=True)
class Balanced(FixedDemand):
    """Demands 6 every round."""

    demand: int = 6


@STRATEGIES
@dataclass(frozen=True)
class Hardball(FixedDemand):
    """Demands 8 every round."""

    demand: int = 8


@STRATEGIES
@dataclass(frozen=True)
class Selfish(FixedDemand):
    """Demands 7 every round."""

    demand: int = 7


@STRATEGIES
@dataclass(frozen=True)
class Accommodating(FixedDemand):
    """Demands 4 every round."""

    demand: int = 4


@STRATEGIES
class Concede(Strategy):
    """Demands 8, 7, 6, 5 in rounds 1-4 (and 5 in any later round), whatever the opponent does."""

    schedule = (8, 7, 6, 5)

    def probabilities(self, view: NegotiationView):
        """Returns for sure the round's demand of the schedule: 8, 7, 6, then 5 from round 4 on."""
        return pure(self.schedule[min(view.round, len(self.schedule) - 1)])


@STRATEGIES
class TFTNeg(Strategy):
    """Demands 5 in round 1, then 10 − the opponent's last demand, clipped to 1..9."""

    def probabilities(self, view: NegotiationView):
        """Returns 5 for sure in round 1, else 10 − the opponent's last demand, clipped to 1..9."""
        if not view.theirs:
            return pure(FAIR)
        return pure(min(max(PIE - view.theirs[-1], DEMANDS[0]), DEMANDS[-1]))


@STRATEGIES
class Random(Strategy):
    """Demands 1 to 9 with probability 1/9 each, every round."""

    def probabilities(self, view: NegotiationView):
        """Returns each demand 1..9 with probability 1/9."""
        return {d: 1 / len(DEMANDS) for d in DEMANDS}


POOLS = Pools(
    train=("FairSplit", "Balanced", "Concede"),
    exploit=("Selfish", "Hardball"),
    collusive=("Accommodating",),
    robust=("TFTNeg", "Random"),
)
SFT_MIXTURE = {"FairSplit": 0.32, "Balanced": 0.27, "Concede": 0.18, "TFTNeg": 0.15, "Random": 0.08}
