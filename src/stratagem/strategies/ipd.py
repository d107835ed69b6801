"""Rule-based IPD strategies, pools and SFT mixture (SEPO §4, App. F, H)."""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.agent import Strategy, pure
from stratagem.games.ipd import IPDView, Move
from stratagem.pools import Pools
from stratagem.registry import Registry

C, D = Move.COOPERATE, Move.DEFECT
STRATEGIES: Registry[type[Strategy]] = Registry("ipd strategy")


def cooperate_with(p: float) -> dict[Move, float]:
    return {C: p, D: 1.0 - p}


@STRATEGIES
class AlwaysCooperate(Strategy):
    def probabilities(self, view: IPDView):
        return pure(C)


@STRATEGIES
class AlwaysDefect(Strategy):
    def probabilities(self, view: IPDView):
        return pure(D)


@STRATEGIES
class TitForTat(Strategy):
    """Cooperate first, then copy the opponent's last move."""

    def probabilities(self, view: IPDView):
        return pure(view.theirs[-1] if view.theirs else C)


@STRATEGIES
class GrimTrigger(Strategy):
    """Cooperate until the opponent defects once, then defect for ever."""

    def probabilities(self, view: IPDView):
        return pure(D if D in view.theirs else C)


@STRATEGIES
@dataclass(frozen=True)
class GenerousTFT(Strategy):
    """TitForTat that forgives a defection with probability ``forgiveness``."""

    forgiveness: float = 1 / 3

    def probabilities(self, view: IPDView):
        if view.theirs and view.theirs[-1] == D:
            return cooperate_with(self.forgiveness)
        return pure(C)


@STRATEGIES
class AlternatingDefect(Strategy):
    """Defects on every even-numbered round (2, 4, …) and cooperates on the others — unless the
    opponent has never defected, in which case it defects every round.

    Departure from SPEC's plain (C, D, C, D, …): an exploit-pool member must punish passive
    compliance, and the reference figures require it — an unconditional cooperator's exploit is
    5.0 while TitForTat's stays 5/8 = 0.625 (its per-round advantage sums to 5 over 8 rounds).
    """

    def probabilities(self, view: IPDView):
        if view.round % 2 == 1 or D not in view.theirs:
            return pure(D)
        return pure(C)


@STRATEGIES
@dataclass(frozen=True)
class Mixed(Strategy):
    """Cooperates with probability ``p`` each round."""

    p: float = 0.7

    def probabilities(self, view: IPDView):
        return cooperate_with(self.p)


@STRATEGIES
class Random(Strategy):
    def probabilities(self, view: IPDView):
        return cooperate_with(0.5)


@STRATEGIES
class SuspiciousTFT(Strategy):
    """Defect first, then copy the opponent's last move."""

    def probabilities(self, view: IPDView):
        return pure(view.theirs[-1] if view.theirs else D)


@STRATEGIES
class Pavlov(Strategy):
    """Win-stay, lose-shift: cooperate when both played the same last round, else defect."""

    def probabilities(self, view: IPDView):
        if not view.mine:
            return pure(C)
        return pure(C if view.mine[-1] == view.theirs[-1] else D)


@STRATEGIES
class TitForTwoTats(Strategy):
    """Defect only after two defections in a row."""

    def probabilities(self, view: IPDView):
        return pure(D if view.theirs[-2:] == (D, D) else C)


POOLS = Pools(
    train=("TitForTat", "GenerousTFT", "Mixed", "GrimTrigger"),
    exploit=("AlwaysDefect", "AlternatingDefect"),
    collusive=("AlwaysCooperate",),
    robust=("SuspiciousTFT", "Pavlov", "TitForTwoTats", "Random"),
)
SFT_MIXTURE = {
    "TitForTat": 0.33,
    "AlwaysDefect": 0.27,
    "GrimTrigger": 0.22,
    "Random": 0.08,
    "GenerousTFT": 0.05,
    "AlwaysCooperate": 0.05,
}
