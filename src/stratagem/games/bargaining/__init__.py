"""Bilateral trade with private reservation values and tool calls (SPEC §8; seed 004)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from stratagem.game import Invalid, Observation, RoundResult, SafetyWeights, Seat
from stratagem.games.bargaining.catalog import (
    Item,
    Scenario,
    builtin_catalog,
    sample_scenario,
    split,
)
from stratagem.games.bargaining.engine import BUYER, SELLER, BargainingState, render_turn
from stratagem.games.bargaining.tools import (
    MAX_PRICE,
    Call,
    ParseError,
    Turn,
    parse_json_calls,
    parse_turn,
    tool_schemas,
)
from stratagem.games.registry import GAMES

__all__ = ["Bargaining", "Call", "Invalid", "Turn", "SELLER", "BUYER"]


@GAMES
class Bargaining:
    name = "bargaining"
    version = 1
    rounds = 1  # one payoff, at the end of the negotiation
    roles = ("seller", "buyer")
    payoff_bounds = (-MAX_PRICE, MAX_PRICE)
    reference_payoff = 1.0
    safety = SafetyWeights(exploit=0.0, collusion=0.0, externality=0.0)

    def __init__(
        self,
        items: Sequence[Item] | None = None,
        *,
        max_rounds: int = 10,
        max_corrections: int = 1,
        strategy_guide: bool = True,
    ):
        self.items = list(items) if items is not None else split(builtin_catalog())["train"]
        self.max_rounds = max_rounds
        self.max_corrections = max_corrections
        self.strategy_guide = strategy_guide

    def new_episode(self, seed: int) -> BargainingState:
        return BargainingState(self, sample_scenario(self.items, seed), seed)

    def from_scenario(self, scenario: Scenario, seed: int) -> BargainingState:
        return BargainingState(self, scenario, seed)

    def parse(self, text: str, legal: tuple[str, ...] = ()) -> Turn | Invalid:
        try:
            return parse_turn(text)
        except ParseError as exc:
            return Invalid(str(exc))

    def tool_schemas(self) -> list[dict]:
        return tool_schemas()

    def parse_tool_calls(self, tool_calls: list, thought: str = "") -> Turn | Invalid:
        """Native JSON tool calls from an endpoint, with exactly the checks of ``parse``."""
        try:
            return Turn(parse_json_calls(tool_calls), thought[:2000])
        except ParseError as exc:
            return Invalid(str(exc))

    def token(self, action: Turn | Invalid) -> str:
        return f"invalid: {action.reason}" if isinstance(action, Invalid) else render_turn(action)

    def answer_text(self, turn: Turn) -> str:
        """A well-formed model answer for ``turn``."""
        code = "\n".join(c.render() for c in turn.calls)
        return f"Thought: {turn.thought or 'my move'}\nCode:\n```py\n{code}\n```"

    def sample_action(self, obs: Observation, rng: random.Random) -> Turn:
        """A random valid turn (random play for the conformance suite)."""
        view = obs.view
        price = round(rng.uniform(0.5 * view.low, 1.5 * view.high), 2)
        offer = Call("make_offer", (("price", price),))
        wait = Call("wait_for_response")
        if view.listing:
            return Turn((offer, wait))
        choices = [
            Turn((offer, wait)),
            Turn((Call("send_message", (("content", "hi"),)), wait)),
            Turn((Call("search_price"), wait)),
            Turn((Call("wait_for_time_period", (("duration", 2.0),)),)),
        ]
        if view.their_standing is not None:
            choices += [Turn((Call("respond_to_offer", (("response", rng.random() < 0.5),)),))]
        if rng.random() < 0.03:
            return Turn((Call("quit_negotiation"),))
        return rng.choice(choices)

    def collusive_act(self, result: RoundResult, seat: Seat) -> bool:
        return False

    def externality(self, result: RoundResult) -> float:
        return 0.0
