"""Comparison drills: one-decision bargaining chats that teach the comparison a demonstration
needs far more often than whole negotiations can show it.

A reservation-price responder (``strategies.bargaining.ReservationPrice``) writes, before each
answer, the open offer beside its reservation value and the word that relates them ("…; my
reservation value is $194.02, so the offer is lower"), then the decision that follows from
the word and its role. A whole demonstrated negotiation holds one to three such decisions in
~1,500 tokens; a drill holds one in ~150 tokens: the game's own role
sentence as the system turn, the game's own state lines with the open offer as the user turn,
and the responder's own answer (thought and tool calls, rendered by the game) as the assistant
turn. So a drill is a real decision of the game stripped of the negotiation around it, and the
answer is the demonstrator's, not a second copy of its rule.

Drills are written like any other SFT chats (``write_chats``), so ``train sft`` takes them as
they are; a curriculum trains on drills first, then on whole negotiations from them (``train
sft --adapter``). Offers lie within ±30 % of the value, where the acceptance curve probes; a
``far`` share lies 1.3–4 times above or below it, as a hard bargainer's early offers do (a model
drilled only near its value called such offers by the wrong word in whole games).

``game_drills`` (``python -m experiments.drills --drills-in-game``) puts the same decision
inside a real episode: the game's whole system prompt for a train-split catalog item and the
game's own user turns, cut after the responder's first answer to an offer (~1,000 tokens). A
model drilled in the short form got the word right for 0.98 of held-out drills but 0.83 once the
game's system prompt was around them. With ``answers`` > 1 (``--drills-answers K``) a drill is
cut after its k-th answer, k drawn from 1 to K: the counterpart first makes k − 1 offers that
lose the responder money, nearing its value the way a hard bargainer concedes, and the responder
refuses each. A model drilled on first answers alone got the first answer of whole games right
16 of 16 times but the seller's later ones 8 of 14, accepting offers far below its value as
"higher".
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from stratagem.agent import Agent
from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.games.bargaining import Bargaining, Turn
from stratagem.games.bargaining.catalog import Regime, scenario
from stratagem.games.bargaining.events import BargainingView
from stratagem.games.bargaining.prompts import role_text, state_lines
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies.bargaining import Bargainer, ReservationPrice, offer
from stratagem.training.sft.data import Chat

MAX_ROUNDS = 10
LOW, HIGH = 10.0, 2000.0  # the reservation values drawn, log-uniformly (the catalog's scale)
MARGIN = 0.3  # offers up to 30 % either side of the value, as the acceptance curve probes
SAME = 0.05  # the share of drills whose offer equals the value (accepted: "the same")
FAR = 4.0  # far offers: a ratio to the value log-uniform in [1 + MARGIN, FAR], above or below
MAX_ANSWERS = 1 + (MAX_ROUNDS - 3) // 2  # the seller answers in rounds 3, 5, 7, 9


def drill_view(role: str, value: float, price: float, round_: int) -> BargainingView:
    """Returns the view of a seat answering an open offer of ``price`` in round ``round_``."""
    return BargainingView(
        role=role,
        reservation=value,
        low=min(round(value * (1 - MARGIN), 2), price),  # the range holds a far offer too
        high=max(round(value * (1 + MARGIN), 2), price),
        round=round_,
        max_rounds=MAX_ROUNDS,
        listing=False,
        my_offers=(),
        their_offers=(price,),
        their_standing=price,
        my_standing=None,
        correction=None,
    )


def drill_prices(rng: random.Random, far: float = 0.0) -> tuple[float, float]:
    """Returns a (reservation value, offered price) pair in cents: the value log-uniform in
    [LOW, HIGH], the price ``offer_price``'s."""
    value = round(math.exp(rng.uniform(math.log(LOW), math.log(HIGH))), 2)
    return value, offer_price(rng, value, far)


def offer_price(rng: random.Random, value: float, far: float = 0.0) -> float:
    """Returns an offer for ``value`` in cents: equal to it in a ``SAME`` share of draws, else
    in a ``far`` share of draws a ratio log-uniform in [1 + MARGIN, FAR] above or below it,
    else within ±MARGIN. With ``far`` 0 no draw is spent on it, so the drills of before are
    unchanged."""
    if rng.random() < SAME:
        return value
    if far and rng.random() < far:
        ratio = math.exp(rng.uniform(math.log(1 + MARGIN), math.log(FAR)))
        return round(value * ratio if rng.random() < 0.5 else value / ratio, 2)
    return round(value * (1 + rng.uniform(-MARGIN, MARGIN)), 2)


def comparison_drills(n: int, seed: int, far: float = 0.0) -> Iterator[Chat]:
    """Yields ``n`` drills, seeded: half as the seller (offers in odd rounds after the listing),
    half as the buyer (even rounds), each answered by ``ReservationPrice``; ``far``: the share
    of offers 1.3–4 times away from the value (``drill_prices``)."""
    rng = random.Random(derive(seed, "comparison-drills"))
    game, responder = Bargaining(), ReservationPrice()
    for i in range(n):
        seat = i % 2
        role = ("seller", "buyer")[seat]
        value, price = drill_prices(rng, far)
        round_ = rng.randrange(3 if seat == 0 else 2, MAX_ROUNDS + 1, 2)
        view = drill_view(role, value, price, round_)
        turn = responder.choose(view, rng)
        answer = game.answer_text(turn)
        messages = [
            {"role": "system", "content": role_text(seat, value)},
            {"role": "user", "content": "\n".join([*state_lines(view, seat), "Your turn."])},
            {"role": "assistant", "content": answer},
        ]
        yield Chat(
            game="bargaining",
            strategy="ReservationPrice",
            opponent="drill",
            actions=(answer,),
            messages=messages,
        )


@dataclass(frozen=True)
class Offerer(Bargainer):
    """The counterpart of an in-game drill: offers ``prices`` in turn, one a turn (as the seller,
    the first is its listing), the last again once they run out, and accepts nothing."""

    prices: tuple[float, ...] = (0.0,)

    def target(self, view: BargainingView) -> float:
        """Returns the price of this turn's offer."""
        return self.prices[min(len(view.my_offers), len(self.prices) - 1)]

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns an offer of this turn's price."""
        return offer(self.target(view), view)


def losing_prices(rng: random.Random, value: float, role: str, k: int) -> tuple[float, ...]:
    """Returns ``k`` offers that lose a ``role`` of reservation ``value`` money (below it for a
    seller, above it for a buyer), each 1.02–4 times away, the farthest first."""
    draws = [math.exp(rng.uniform(math.log(1.02), math.log(FAR))) for _ in range(k)]
    ratios = sorted(draws, reverse=True)
    return tuple(round(value / r if role == "seller" else value * r, 2) for r in ratios)


def game_drills(n: int, seed: int, far: float = 0.0, answers: int = 1) -> Iterator[Chat]:
    """Yields ``n`` drills inside whole games, seeded: each a real episode on a train-split
    catalog scenario, with the game's whole system prompt (item, range, tools, rules, strategy
    guide) and its own user turns, cut after the responder's k-th answer to an offer, k drawn
    from 1 to ``answers`` (1: no draw, the drills of before). As the buyer (even drills) it
    answers the seller's offers in rounds 2, 4, …; as the seller it lists at its value in round
    1 and answers the buyer's offers in rounds 3, 5, …. The k-th offer is ``offer_price``'s for
    the seat's value (``far`` as in ``comparison_drills``), the ones before it
    ``losing_prices``'; ~1,000 tokens a drill, ~150 more an answer."""
    game = get_game("bargaining", split="train")
    items = cast(Bargaining, game).items
    rng = random.Random(derive(seed, "game-drills"))
    responder = cast(Agent, ReservationPrice())
    finished: list[Episode] = []  # each drill's episode, for its chat
    for i in range(n):
        seat = i % 2
        regime: Regime = "GFT" if rng.random() < 2 / 3 else "NGFT"
        s = scenario(items, i, regime, derive(seed, "game-drill-scenario", i))
        value = s.seller_value if seat == 0 else s.buyer_value
        price = offer_price(rng, value, far)
        k = rng.randint(1, answers) if answers > 1 else 1  # no draw: the drills of before
        earlier = losing_prices(rng, value, ("seller", "buyer")[seat], k - 1)
        counterpart = cast(Agent, Offerer((*earlier, price)))
        agents = (responder, counterpart) if seat == 0 else (counterpart, responder)
        spec = EpisodeSpec(f"drill-{i}", derive(seed, "game-drill", i), agents, scenario=s)
        (trace,) = play(game, [spec], on_episode=finished.append)
        episode = finished.pop()
        turns = [m.to_dict() for m in episode.chat(seat)]
        answered = [j for j, m in enumerate(turns) if m["role"] == "assistant"]
        cut = answered[k - seat] + 1  # the seller's first answer is its listing
        decisions = tuple(d.action for d in trace.decisions if d.seat == seat)[: k + 1 - seat]
        yield Chat(
            game="bargaining",
            strategy="ReservationPrice",
            opponent="drill",
            actions=decisions,
            messages=[{"role": "system", "content": episode.rules(seat) or ""}, *turns[:cut]],
        )


OPTIONS = ("far", "in_game", "answers")  # the DrillSettings these drills take


def drills(
    n: int, seed: int, far: float = 0.0, in_game: bool = False, answers: int = 1
) -> Iterator[Chat]:
    """The game's drills for ``python -m experiments.drills --drills``: ``game_drills`` with
    ``in_game``, else ``comparison_drills``.

    Raises:
        ConfigError: ``answers`` > 1 without ``in_game`` (a short drill holds one answer), or
            above ``MAX_ANSWERS``.
    """
    if not in_game:
        if answers > 1:
            raise ConfigError("--drills-answers needs --drills-in-game")
        return comparison_drills(n, seed, far)
    if answers > MAX_ANSWERS:
        raise ConfigError(f"--drills-answers {answers}: a game has room for {MAX_ANSWERS}")
    return game_drills(n, seed, far, answers)
