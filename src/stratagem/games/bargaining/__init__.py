"""Bilateral trade with private reservation values and tool calls (SPEC §8; seed 004).

``Bargaining`` holds the rules and parameters; ``engine`` the discrete-event episode state,
``tools`` the parse-never-execute tool-call parser, ``prompts`` what agents read and ``catalog``
the items and scenarios. The game declares the capabilities generic code asks for: scenarios
(every pairing of a tournament plays the same ones), tools (native JSON tool calls), a completion
check (a closed code block that parses), answer text, random valid turns and payoff bounds. Its
tournament report (per role and regime) registers itself in ``stratagem.report.bargaining``. It
is not a SEPO game: there is no collusive act or externality to measure.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from stratagem.errors import ConfigError
from stratagem.game import Invalid, Observation, check_prompt_style
from stratagem.games.bargaining.catalog import (
    Item,
    Scenario,
    builtin_catalog,
    load_craigslist,
    sample_scenario,
    scenarios,
    split,
)
from stratagem.games.bargaining.engine import BargainingState, Settings, render_turn
from stratagem.games.bargaining.events import BUYER, SELLER, BargainingView
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

__all__ = ["Bargaining", "BargainingView", "Call", "Invalid", "Turn", "SELLER", "BUYER"]
SPLIT_NAMES = ("train", "validation", "test")


@GAMES
class Bargaining:
    """A seller and a buyer trade one catalog item by alternating tool-call turns (SPEC §8)."""

    name: ClassVar[str] = "bargaining"
    # v2: a round is one turn, implicit wait_for_response, quoted messages, chat
    version: ClassVar[int] = 2
    max_new_tokens = 256  # a turn is a thought plus tool calls: the budget of an LLM agent
    roles = ("seller", "buyer")
    payoff_bounds = (-MAX_PRICE, MAX_PRICE)

    def __init__(
        self,
        items: Sequence[Item] | None = None,
        *,
        catalog: str | list[str] | list[dict[str, Any]] | None = None,
        split: str | None = "train",
        split_seed: int = 42,
        max_rounds: int = 10,
        max_corrections: int = 1,
        strategy_guide: bool = True,
        prompt_style: str = "chat",
    ):
        """Builds the game; every argument but ``items`` is a JSON parameter (``params``).

        Args:
            items: items to trade, for tests and notebooks; stored as ``catalog`` (a list of item
                dicts) with ``split=None``, so ``get_game("bargaining", **params)`` rebuilds it.
            catalog: None for the shipped catalog, a path to a CraigslistBargains JSON file, a
                list of such paths (read in order), or a list of item dicts (title, category,
                description, low, high).
            split: the part of the catalog episodes draw from (train, validation, test), or None
                for all of it.
            split_seed: seeds the 80 / 8.5 / 11.5 split of the catalog.
            max_rounds: the round limit; a round is one turn, the listing is round 1.
            max_corrections: corrections per turn before the fallback turn is played.
            strategy_guide: whether system prompts carry the negotiation tips.
            prompt_style: ``chat`` (a user turn holds what is new) or ``single`` (the whole log).

        Raises:
            ConfigError: a bad value (unknown split, a round limit under 2, an empty catalog).
        """
        if items is not None:
            if catalog is not None:
                raise ConfigError("bargaining: give items or a catalog, not both")
            catalog, split = [asdict(item) for item in items], None
        if isinstance(catalog, Path):
            catalog = str(catalog)
        elif isinstance(catalog, list | tuple) and all(isinstance(x, Path) for x in catalog):
            catalog = [str(x) for x in catalog]
        if split is not None and split not in SPLIT_NAMES:
            raise ConfigError(f"bargaining: unknown split {split!r}; choose from {SPLIT_NAMES}")
        if not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or max_rounds < 2:
            raise ConfigError("bargaining: max_rounds must be an integer of at least 2")
        if not isinstance(max_corrections, int) or max_corrections < 0:
            raise ConfigError("bargaining: max_corrections must be a non-negative integer")
        self.items = _load(catalog, split, split_seed)
        self.settings = Settings(
            max_rounds, max_corrections, bool(strategy_guide), check_prompt_style(prompt_style)
        )
        self._params = MappingProxyType(
            {
                "catalog": catalog,
                "split": split,
                "split_seed": split_seed,
                "max_rounds": max_rounds,
                "max_corrections": max_corrections,
                "strategy_guide": bool(strategy_guide),
                "prompt_style": prompt_style,
            }
        )

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (JSON values); ``get_game("bargaining", **params)`` rebuilds
        the same game."""
        return self._params

    @property
    def max_rounds(self) -> int:
        """The round limit (a round is one turn)."""
        return self.settings.max_rounds

    def new_episode(self, seed: int) -> BargainingState:
        """Returns an episode on a scenario drawn from ``seed`` (GFT : NGFT = 2 : 1)."""
        return BargainingState(sample_scenario(self.items, seed), seed, self.settings)

    def from_scenario(self, scenario: Scenario | Mapping[str, Any], seed: int) -> BargainingState:
        """Returns an episode playing ``scenario`` (a ``Scenario`` or its dict form)."""
        if not isinstance(scenario, Scenario):
            scenario = Scenario.from_dict(dict(scenario))
        return BargainingState(scenario, seed, self.settings)

    def tournament_scenarios(self, gft: int, ngft: int, seed: int = 42) -> list[Scenario]:
        """Returns exactly ``gft`` GFT then ``ngft`` NGFT scenarios drawn from the game's items:
        the list every pairing of a tournament plays."""
        return scenarios(self.items, gft, ngft, seed)

    def parse(self, text: str, legal: tuple[str, ...] = ()) -> Turn | Invalid:
        """Returns the turn in a model's answer, or ``Invalid(reason)`` to send back."""
        try:
            return parse_turn(text)
        except ParseError as exc:
            return Invalid(str(exc))

    def token(self, action: Turn | Invalid) -> str:
        """Returns the calls of a turn as one line (what traces store), or ``invalid: reason``."""
        return f"invalid: {action.reason}" if isinstance(action, Invalid) else render_turn(action)

    def tool_schemas(self) -> list[dict]:
        """Returns the seven tools as OpenAI function-calling schemas."""
        return tool_schemas()

    def parse_tool_calls(self, tool_calls: list, thought: str = "") -> Turn | Invalid:
        """Returns the turn for native JSON tool calls, checked exactly as ``parse`` checks code."""
        try:
            return Turn(parse_json_calls(tool_calls), str(thought)[:2000])
        except ParseError as exc:
            return Invalid(str(exc))

    def complete(self, text: str) -> bool:
        """Returns whether ``text`` holds a closed code block that parses (generation may stop:
        more tokens could only add a second block, which is refused)."""
        if text.count("```") < 2:
            return False  # fast path: no closed fence yet
        try:
            parse_turn(text)
        except ParseError:
            return False
        return True

    def answer_text(self, action: Turn) -> str:
        """Returns a well-formed model answer that parses to ``action``."""
        code = "\n".join(c.render() for c in action.calls)
        return f"Thought: {action.thought or 'my move'}\nCode:\n```py\n{code}\n```"

    def sample_action(self, obs: Observation, rng: random.Random) -> Turn:
        """Returns a random turn valid at ``obs`` (random play in the conformance suite)."""
        view: BargainingView = obs.view
        price = round(rng.uniform(0.5 * view.low, 1.5 * view.high), 2)
        offer = Call("make_offer", (("price", price),))
        wait = Call("wait_for_response")
        if view.listing:
            return Turn((offer, wait))
        choices = [
            Turn((offer, wait)),
            Turn((offer,)),  # an implicit wait_for_response ends it
            Turn((Call("send_message", (("content", "hi"),)), wait)),
            Turn((Call("search_price"),)),
            Turn((Call("wait_for_time_period", (("duration", 2.0),)), offer)),
        ]
        if view.their_standing is not None:
            reject = Call("respond_to_offer", (("response", False),))
            choices += [
                Turn((Call("respond_to_offer", (("response", True),)),)),
                Turn((reject, offer)),
                Turn((reject, wait)),
            ]
        if rng.random() < 0.03:
            return Turn((Call("quit_negotiation"),))
        return rng.choice(choices)


def _load(catalog: Any, part: str | None, seed: int) -> list[Item]:
    if catalog is None:
        items = builtin_catalog()
    elif isinstance(catalog, str):
        items = load_craigslist(catalog)
    elif isinstance(catalog, list) and catalog and all(isinstance(x, str) for x in catalog):
        items = load_craigslist(catalog)
    elif isinstance(catalog, list):
        try:
            items = [Item(**dict(row)) for row in catalog]
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bargaining: a catalog item is malformed ({exc})") from None
    else:
        raise ConfigError("bargaining: catalog must be None, a file path or a list of items")
    if part is not None:
        items = split(items, seed)[part]
    if not items:
        raise ConfigError("bargaining: the catalog (split) has no items")
    return items
