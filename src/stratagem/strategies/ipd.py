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
    """Returns the distribution that cooperates with probability ``p`` and defects otherwise."""
    return {C: p, D: 1.0 - p}


@STRATEGIES
class AlwaysCooperate(Strategy):
    """Cooperates every round."""

    def probabilities(self, view: IPDView):
        """Returns COOPERATE for sure."""
        return pure(C)


@STRATEGIES
class AlwaysDefect(Strategy):
    """Defects every round."""

    def probabilities(self, view: IPDView):
        """Returns DEFECT for sure."""
        return pure(D)


@STRATEGIES
class TitForTat(Strategy):
    """Cooperates in round 1, then plays the opponent's move of the previous round."""

    def probabilities(self, view: IPDView):
        """Returns the probability of each action at ``view``: cooperate first, then copy the
        opponent's last move.
        """
        return pure(view.theirs[-1] if view.theirs else C)


@STRATEGIES
class GrimTrigger(Strategy):
    """Cooperates until the opponent defects once, then defects in every later round."""

    def probabilities(self, view: IPDView):
        """Returns DEFECT for sure once the opponent has ever defected, else COOPERATE."""
        return pure(D if D in view.theirs else C)


@STRATEGIES
@dataclass(frozen=True)
class GenerousTFT(Strategy):
    """TitForTat that forgives a defection with probability ``forgiveness`` (1/3).

    It cooperates in round 1 and after an opponent's cooperation; after an opponent's defection
    it cooperates with probability ``forgiveness``, else defects.
    """

    forgiveness: float = 1 / 3

    def probabilities(self, view: IPDView):
        """Returns COOPERATE with probability ``forgiveness`` after an opponent's defection, else
        COOPERATE for sure.
        """
        if view.theirs and view.theirs[-1] == D:
            return cooperate_with(self.forgiveness)
        return pure(C)


@STRATEGIES
class AlternatingDefect(Strategy):
    """Defects until the opponent first defects; from then on C on odd rounds, D on even ones.

    Every even-numbered round (2, 4, …) it defects; on the others it cooperates only if the
    opponent has defected at least once before, so against an opponent that has retaliated it
    plays C, D, C, D, … (SPEC §2.1). The condition punishes passive compliance, as the reference
    figures require: an unconditional cooperator's exploit is 5.0 while TitForTat's stays
    5/8 = 0.625 (its per-round advantage sums to 5 over 8 rounds).
    """

    def probabilities(self, view: IPDView):
        """Returns DEFECT for sure on even rounds and against an opponent that has never defected,
        else COOPERATE.
        """
        if view.round % 2 == 1 or D not in view.theirs:
            return pure(D)
        return pure(C)


@STRATEGIES
@dataclass(frozen=True)
class Mixed(Strategy):
    """Cooperates with probability ``p`` (0.7) each round, independently of the history."""

    p: float = 0.7

    def probabilities(self, view: IPDView):
        """Returns COOPERATE with probability ``p``, DEFECT otherwise."""
        return cooperate_with(self.p)


@STRATEGIES
class Random(Strategy):
    """Cooperates or defects with probability 1/2 each, every round."""

    def probabilities(self, view: IPDView):
        """Returns COOPERATE and DEFECT with probability 1/2 each."""
        return cooperate_with(0.5)


@STRATEGIES
class SuspiciousTFT(Strategy):
    """Defects in round 1, then plays the opponent's move of the previous round."""

    def probabilities(self, view: IPDView):
        """Returns the probability of each action at ``view``: defect first, then copy the
        opponent's last move.
        """
        return pure(view.theirs[-1] if view.theirs else D)


@STRATEGIES
class Pavlov(Strategy):
    """Win-stay, lose-shift: cooperates first, then after CC or DD, and defects after CD or DC."""

    def probabilities(self, view: IPDView):
        """Returns COOPERATE for sure in round 1 or when both seats played the same last round, else
        DEFECT.
        """
        if not view.mine:
            return pure(C)
        return pure(C if view.mine[-1] == view.theirs[-1] else D)


@STRATEGIES
class TitForTwoTats(Strategy):
    """Defects only when the opponent defected in both of the last two rounds, else cooperates."""

    def probabilities(self, view: IPDView):
        """Returns DEFECT for sure when the opponent defected in each of the last two rounds, else
        COOPERATE.
        """
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
