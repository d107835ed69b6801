"""Rule-based Kuhn strategies, pools and SFT mixture (SEPO §4, App. F, H).

Every Kuhn strategy is a table: for each betting history and card, the probability of the
aggressive act there (BET when no bet is faced, CALL when facing one). Its ``probabilities`` are
therefore exact at all 12 information sets, which exact exploitability reads.
"""

from __future__ import annotations

from stratagem.agent import Strategy
from stratagem.games.kuhn import CA, B, F, KuhnView, P
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("kuhn strategy")
OPEN, AFTER_PASS, FACING_BET, FACING_BET_AFTER_PASS = (), (P,), (B,), (P, B)
# history -> (passive act, aggressive act)
ACTS = {OPEN: (P, B), AFTER_PASS: (P, B), FACING_BET: (F, CA), FACING_BET_AFTER_PASS: (F, CA)}
Table = dict[tuple, dict[str, float]]  # history -> card -> probability of the aggressive act


class TableStrategy(Strategy):
    """A Kuhn strategy as a table: the probability of the aggressive act per betting and card.

    ``table[history][card]`` is that probability. The aggressive act is BET when no bet is faced
    and CALL when facing one; the rest goes to PASS or FOLD. The history says the position: ``()``
    and ``(PASS, BET)`` are decisions of the first to act, ``(PASS,)`` and ``(BET,)`` of the
    second.
    """

    table: Table

    def probabilities(self, view: KuhnView):
        """Returns the aggressive act with the table's probability for the betting so far and the
        card, and the passive act with the rest.
        """
        passive, aggressive = ACTS[view.history]
        p = self.table[view.history][view.card]
        return {passive: 1.0 - p, aggressive: p}


def betting(open_: dict, after_pass: dict, facing_bet: dict, facing_bet_after_pass: dict) -> Table:
    """Returns a table from the card probabilities at the four betting histories: the first to act
    opening, the second after a pass, the second facing a bet, the first facing a bet after passing.
    """
    return {
        OPEN: open_,
        AFTER_PASS: after_pass,
        FACING_BET: facing_bet,
        FACING_BET_AFTER_PASS: facing_bet_after_pass,
    }


def by_card(j: float, q: float, k: float) -> dict[str, float]:
    """Returns the probabilities for J, Q and K as a card -> probability mapping."""
    return {"J": j, "Q": q, "K": k}


ALPHA = 1 / 3


@STRATEGIES
class NashApprox(TableStrategy):
    """The equilibrium at the α = 1/3 end of Kuhn's family (SPEC §2.5).

    First to act: bets J with α = 1/3, K always (3α), Q never; after passing and facing a bet,
    calls Q with α + 1/3 = 2/3, folds J, calls K. Second to act: after a pass bets K, bluffs J
    with 1/3 and passes Q; facing a bet calls K, calls Q with 1/3 and folds J.
    """

    table = betting(
        open_=by_card(ALPHA, 0.0, 3 * ALPHA),
        after_pass=by_card(1 / 3, 0.0, 1.0),
        facing_bet=by_card(0.0, 1 / 3, 1.0),
        facing_bet_after_pass=by_card(0.0, ALPHA + 1 / 3, 1.0),
    )


@STRATEGIES
class TightPassive(TableStrategy):
    """Bets and calls only with K; passes and folds with J and Q."""

    table = betting(*(by_card(0.0, 0.0, 1.0),) * 4)


@STRATEGIES
class LooseAggressive(TableStrategy):
    """Bets and calls with Q and K, bluffs with J half the time, folds J to a bet."""

    table = betting(
        by_card(0.5, 1.0, 1.0),
        by_card(0.5, 1.0, 1.0),
        by_card(0.0, 1.0, 1.0),
        by_card(0.0, 1.0, 1.0),
    )


@STRATEGIES
class AlwaysBet(TableStrategy):
    """Bets or calls, always."""

    table = betting(*(by_card(1.0, 1.0, 1.0),) * 4)


@STRATEGIES
class BluffHeavy(TableStrategy):
    """Bets every J and K (passes Q) and calls every bet."""

    table = betting(
        by_card(1.0, 0.0, 1.0),
        by_card(1.0, 0.0, 1.0),
        by_card(1.0, 1.0, 1.0),
        by_card(1.0, 1.0, 1.0),
    )


@STRATEGIES
class PotControl(TableStrategy):
    """Bets only with K; calls a bet with Q or K, folds J."""

    table = betting(
        by_card(0.0, 0.0, 1.0),
        by_card(0.0, 0.0, 1.0),
        by_card(0.0, 1.0, 1.0),
        by_card(0.0, 1.0, 1.0),
    )


@STRATEGIES
class TightValue(TableStrategy):
    """Bets only with K and never bluffs; calls with K, and with Q half the time; folds J."""

    table = betting(
        by_card(0.0, 0.0, 1.0),
        by_card(0.0, 0.0, 1.0),
        by_card(0.0, 0.5, 1.0),
        by_card(0.0, 0.5, 1.0),
    )


@STRATEGIES
class AlwaysPassQueen(TableStrategy):
    """NashApprox, except that with Q it always passes and folds to any bet."""

    table = {history: {**cards, "Q": 0.0} for history, cards in NashApprox.table.items()}


@STRATEGIES
class RandomLegal(TableStrategy):
    """Plays each of the two legal actions with probability 1/2 at every decision."""

    table = betting(*(by_card(0.5, 0.5, 0.5),) * 4)


POOLS = Pools(
    train=("NashApprox", "TightPassive", "LooseAggressive"),
    exploit=("AlwaysBet", "BluffHeavy"),
    collusive=(),
    robust=("RandomLegal", "PotControl"),
)
SFT_MIXTURE = {
    "NashApprox": 0.45,
    "TightValue": 0.25,
    "PotControl": 0.20,
    "RandomLegal": 0.08,
    "AlwaysPassQueen": 0.02,
}
