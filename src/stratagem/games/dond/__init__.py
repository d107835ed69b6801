"""Deal or No Deal: two seats split books, hats and balls by dialogue (SPEC §7; seed 002 App. A).

A context is the item counts and one private value vector per seat. Seats alternate turns; a turn
is ``[message] text`` or ``[propose] (x books, y hats, z balls)`` (the counts the proposer keeps).
After one seat proposes the other must propose too, and the episode ends: complementary
proposals (summing to the counts) pay each seat its item score ``R_i = values_i · proposal_i``,
anything else pays 0 to both. Seat i's payoff is its objective ``R_i + λ·R_j`` (λ = 1
cooperative, 0 semi-competitive, −1 zero-sum). After ``max_turns`` accepted turns with no
proposal, messages are refused: both seats must propose. One episode is one round.

Proposals are private, as in seed 002: the other seat learns *that* a proposal was submitted,
never its counts. The other seat's messages reach a seat as quoted text (RELIABILITY G5).

Refused answers are corrected through the shared policy (``games.corrections``): no limit per
turn, and five consecutive refused answers of one seat abort the episode with 0 for both (seed
002 App. A). The seven faults of seed 002 Table 4 are checked, in our own words; three are ours:
a proposal that is not three whole counts, a message after the turn limit, and an answer refused
before it reached the game (an ``Invalid`` from elsewhere).

Contexts (SPEC §7): counts ≥ 1 each, 5–7 items in all; each value vector non-negative with
``Σ count·value = 10``; every item type valued by at least one seat; no division gives both seats
10. All such ordered pairs are enumerated once and drawn by seed; a file in the original DoND
context format can replace them (``contexts=PATH``), each loaded context checked, lines that do
not pair up refused; ``params`` then hold the file's SHA-256 (``contexts_sha256``), so a changed
file is another run, and a run folder keeps a copy (``HasInputFiles``).

Departures: the paper samples from the 4,186 contexts of the original release; we enumerate every
context its criteria allow (5,793 ordered pairs) unless a file is given. An answer is read after
dropping closed ``<think>`` blocks and must *start* with its prefix (the paper's rule), rather
than carry the action on its last line (SPEC §4.1): a DoND turn is the message itself.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.game import Invalid, Observation, check_prompt_style
from stratagem.games.dond.contexts import (
    EVAL_SHARE,
    ITEMS,
    MAX_ITEMS,
    MIN_ITEMS,
    SINGULAR,
    TOTAL_VALUE,
    Context,
    ContextSplit,
    Items,
    LoadedContexts,
    agreed,
    all_contexts,
    complement,
    context_problems,
    divisions,
    item_scores,
    joint_values,
    load_contexts,
    objective_scores,
    payoff_bounds,
    pool_text,
    score,
    split_contexts,
)
from stratagem.games.dond.prompts import full_prompt, new_prompt, objective_text, system_prompt
from stratagem.games.dond.state import NAME, DondState, Settings
from stratagem.games.dond.turns import (
    DEFAULT_MAX_TURNS,
    MAX_FAULTS,
    REASONS,
    Fault,
    Kind,
    Propose,
    Say,
    Turn,
    fault_of,
    parse_turn,
    render_share,
    token_of,
)
from stratagem.games.dond.view import DondView, Line
from stratagem.games.registry import GAMES
from stratagem.seeding import derive

__all__ = [
    "DEFAULT_MAX_TURNS",
    "ITEMS",
    "MAX_FAULTS",
    "MAX_ITEMS",
    "MIN_ITEMS",
    "OBJECTIVES",
    "REASONS",
    "SINGULAR",
    "TOTAL_VALUE",
    "Context",
    "Dond",
    "DondState",
    "DondView",
    "EVAL_SHARE",
    "ContextSplit",
    "Fault",
    "Items",
    "Kind",
    "Line",
    "LoadedContexts",
    "Propose",
    "Say",
    "Settings",
    "Turn",
    "agreed",
    "all_contexts",
    "complement",
    "context_problems",
    "divisions",
    "fault_of",
    "full_prompt",
    "item_scores",
    "joint_values",
    "load_contexts",
    "new_prompt",
    "objective_scores",
    "objective_text",
    "parse_turn",
    "payoff_bounds",
    "pool_text",
    "render_share",
    "resolve_lam",
    "score",
    "split_contexts",
    "system_prompt",
    "token_of",
]

OBJECTIVES = MappingProxyType({"coop": 1.0, "semi": 0.0, "comp": -1.0})  # name -> λ


@GAMES
class Dond:
    """Deal or No Deal with the objective ``R_i + λ·R_j`` (SPEC §7; seed 002)."""

    name: ClassVar[str] = NAME
    version: ClassVar[int] = 1
    max_new_tokens = 256  # a turn is a free-form message: the budget of an LLM agent

    def __init__(
        self,
        *,
        lam: float | None = None,
        objective: str | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        prompt_style: str = "chat",
        contexts: str | None = None,
        contexts_sha256: str | None = None,
    ):
        """Builds the game; ``params`` holds the resolved values (``objective`` becomes ``lam``).

        Args:
            lam: λ in [−1, 1]: each seat's payoff is ``R_i + λ·R_j`` (default 0).
            objective: ``coop`` (λ = 1), ``semi`` (λ = 0) or ``comp`` (λ = −1), instead of λ.
            max_turns: accepted turns before messages close and both seats must propose.
            prompt_style: ``chat`` (a user turn holds what is new) or ``single`` (the dialogue).
            contexts: None for every valid context, or the path of a context file in the
                original DoND format (contexts failing the criteria are left out, with a warning).
            contexts_sha256: The SHA-256 the context file must have (``params`` records it, so
                run fingerprints and traces name the file's content, not only its path).

        Raises:
            ConfigError: a bad value, a λ that contradicts ``objective``, a context file with
                no valid context, lines that do not pair up, or content other than
                ``contexts_sha256``.
        """
        lam = resolve_lam(lam, objective)
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise ConfigError("dond: max_turns must be an integer of at least 1")
        if isinstance(contexts, Path):
            contexts = str(contexts)
        if contexts is not None and not isinstance(contexts, str):
            raise ConfigError("dond: contexts must be None or the path of a context file")
        self.settings = Settings(lam, max_turns, check_prompt_style(prompt_style))
        self.payoff_bounds = payoff_bounds(lam)
        self.context_failures: tuple[str, ...] = ()
        if contexts is None:
            self.contexts = all_contexts()
        else:
            loaded = load_contexts(contexts)
            if contexts_sha256 is not None and loaded.sha256 != contexts_sha256:
                raise ConfigError(
                    f"dond: the context file {contexts} has changed (sha256 {loaded.sha256[:12]}, "
                    f"recorded {contexts_sha256[:12]}); a changed file is a different run"
                )
            contexts_sha256 = loaded.sha256
            self.contexts, self.context_failures = loaded.contexts, loaded.failures
            if not self.contexts:
                raise ConfigError(f"dond: no valid context in {contexts}: {loaded.failures[:3]}")
            if self.context_failures:
                warnings.warn(
                    f"dond: {len(self.context_failures)} of "
                    f"{len(self.contexts) + len(self.context_failures)} contexts in {contexts} "
                    f"fail the criteria and are left out (first: {self.context_failures[0]})",
                    stacklevel=2,
                )
        if contexts is None and contexts_sha256 is not None:
            raise ConfigError("dond: contexts_sha256 names the content of a context file; give one")
        params: dict[str, Any] = {"lam": lam, "max_turns": max_turns, "prompt_style": prompt_style}
        params["contexts"] = contexts
        if contexts is not None:  # the content, not only the path, names the run's contexts
            params["contexts_sha256"] = contexts_sha256
        self._params = MappingProxyType(params)
        self._splits: dict[int, ContextSplit] = {}  # split_contexts by seed: 5,793 hashes each

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (JSON values); ``get_game("dond", **params)`` rebuilds it."""
        return self._params

    def input_files(self) -> dict[str, str]:
        """The context file this game read, by parameter (``game.HasInputFiles``)."""
        return {} if self._params["contexts"] is None else {"contexts": self._params["contexts"]}

    @property
    def lam(self) -> float:
        """λ of the objective ``R_i + λ·R_j``."""
        return self.settings.lam

    def new_episode(self, seed: int) -> DondState:
        """Returns a dialogue on a context drawn from ``seed`` (first speaker drawn too)."""
        context = random.Random(derive(seed, "context")).choice(self.contexts)
        return DondState(context, seed, self.settings)

    def training_scenario(self, split_seed: int, seed: int) -> Context:
        """The context of a training episode seeded ``seed``: drawn from the training side of
        ``split_contexts(self.contexts, split_seed)``, whose held-out side self-play and the
        claim probe seeded ``split_seed`` evaluate on (``game.HasHeldOutScenarios``)."""
        split = self._splits.get(split_seed)
        if split is None:
            split = self._splits[split_seed] = split_contexts(self.contexts, split_seed)
        return split.draw(held_out=False, seed=seed)

    def from_scenario(self, scenario: Context | Mapping[str, Any], seed: int) -> DondState:
        """Returns a dialogue on ``scenario`` (a ``Context`` or its dict form).

        Raises:
            ConfigError: the scenario is malformed or breaks the context criteria.
        """
        ctx = scenario if isinstance(scenario, Context) else Context.from_dict(scenario)
        problems = context_problems(ctx)
        if problems:
            raise ConfigError(f"dond: invalid scenario: {'; '.join(problems)}")
        return DondState(ctx, seed, self.settings)

    def parse(self, text: str, legal: tuple[str, ...] = ()) -> Turn | Invalid:
        """Returns the turn in a model's answer, or ``Invalid(reason)`` to send back."""
        return parse_turn(text)

    def token(self, action: Turn | Invalid) -> str:
        """Returns the turn as written (what traces store), or ``invalid: reason``."""
        return token_of(action)

    def answer_text(self, action: Turn | Invalid) -> str:
        """Returns a well-formed answer that parses to ``action`` (its written form)."""
        return token_of(action)

    def sample_action(self, obs: Observation, rng: random.Random) -> Turn:
        """Returns a random turn valid at ``obs``, from public facts only (the counts, the turn):
        a proposal when one is due, a message before any was sent, else either."""
        view: DondView = obs.view
        share = tuple(rng.randint(0, n) for n in view.counts)
        if view.must_propose or (view.discussed and rng.random() < 0.25):
            return Propose(share)  # type: ignore[arg-type]
        chatter = (
            "Hello! How shall we split these?",
            f"I would like to keep {render_share(share)}.",  # type: ignore[arg-type]
            "Which items matter most to you?",
            "That does not work for me.",
            "Fine, let us settle it.",
        )
        return Say(rng.choice(chatter))


def resolve_lam(lam: Any, objective: str | None) -> float:
    """Returns λ from ``lam`` or the named ``objective`` (0, semi-competitive, by default).

    Raises:
        ConfigError: λ is not a number in [−1, 1], the objective is unknown, or both are given
            and disagree.
    """
    if objective is not None:
        if objective not in OBJECTIVES:
            raise UnknownNameError("dond objective", str(objective), OBJECTIVES)
        if lam is not None and lam != OBJECTIVES[objective]:
            raise ConfigError(
                f"dond: objective {objective} means lam={OBJECTIVES[objective]:g}, not {lam}"
            )
        lam = OBJECTIVES[objective]
    if lam is None:
        return 0.0
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not math.isfinite(lam):
        raise ConfigError(f"dond: lam must be a number in [-1, 1], got {lam!r}")
    if not -1.0 <= lam <= 1.0:
        raise ConfigError(f"dond: lam must be in [-1, 1], got {lam}")
    return float(lam)
