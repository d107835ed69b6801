"""PSRO over instruction strings (SPEC §9; seed 003 Alg. 1): tree expansion restricted to one
instruction per seat.

``instruction_payoffs`` expands, for each pair of instructions and each scenario, the tree in
which each seat always uses its instruction (every seed path, so the expectation over the k seeds
is exact) and averages the expected returns over scenarios; ``InstructionOracle`` best-responds
with candidates from a list and, optionally, new ones the LLM proposes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stratagem.backends.base import Sampling
from stratagem.backends.cache import CachedBackend
from stratagem.errors import StratagemError
from stratagem.games.dialogue.base import ANY, Domain, Scenario
from stratagem.seeding import derive
from stratagem.solvers.dialogue.expansion import check_solvable, expand
from stratagem.solvers.dialogue.tree import DialogueTree
from stratagem.solvers.tree import expected_returns
from stratagem.tree import infosets

if TYPE_CHECKING:
    from stratagem.solvers.psro import Evaluate, MetaGame


def fixed_policy(root: Any, choice: str | Mapping[int, str]) -> dict[str, dict[str, float]]:
    """The policy playing ``choice`` (one instruction, or one per seat) at every information
    set (e.g. ``"any"``: the baseline LLM)."""
    out = {}
    for key, (player, actions) in infosets(root).items():
        pick = choice if isinstance(choice, str) else choice[player]
        if pick not in actions:
            raise ValueError(f"{pick!r} is not an instruction of this tree ({actions})")
        out[key] = {a: float(a == pick) for a in actions}
    return out


def instruction_payoffs(
    domain: Domain,
    scenarios: Sequence[Scenario],
    backend: CachedBackend,
    pairs: Sequence[tuple[str, str]],
    **tree_args: Any,
) -> dict[tuple[str, str], tuple[float, float]]:
    """Returns, for each (seat-0, seat-1) instruction pair, both seats' payoffs averaged over
    ``scenarios`` when each seat always uses its instruction: the trees restricted to the pair,
    expanded together (every seed path: exact over the k seeds), judged, and evaluated."""
    trees = {
        (pair, s.id): DialogueTree(
            domain, s, backend, instructions=((pair[0],), (pair[1],)), **tree_args
        )
        for pair in pairs
        for s in scenarios
    }
    if trees:
        expand(list(trees.values()))
        check_solvable(list(trees.values()))  # a failed generation is never a payoff
    out = {}
    for pair in pairs:
        values = np.array(
            [
                expected_returns(
                    trees[pair, s.id].root,
                    fixed_policy(trees[pair, s.id].root, dict(enumerate(pair))),
                )
                for s in scenarios
            ]
        )
        out[pair] = (float(values[:, 0].mean()), float(values[:, 1].mean()))
    return out


def instruction_meta_game(
    domain: Domain, scenarios: Sequence[Scenario], backend: CachedBackend, **tree_args: Any
) -> Evaluate:
    """The ``Evaluate`` of PSRO's meta-game over instruction strings (see
    ``instruction_payoffs``)."""

    def evaluate(pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[float, float]]:
        return instruction_payoffs(domain, scenarios, backend, pairs, **tree_args)

    return evaluate


@dataclass
class InstructionOracle:
    """Approximate best response over instruction strings (seed 003 Alg. 1): the candidate with
    the highest expected payoff against the opponent's meta-strategy, where candidates are a
    list and, when ``propose`` > 0, that many new instructions the LLM suggests at each response
    (one word each; an answer that is not a new usable word is logged as a failure)."""

    candidates: list[str]
    domain: Domain
    backend: CachedBackend | None = None
    propose: int = 0
    sampling: Sampling = field(default_factory=lambda: Sampling(1.0, 0.95, 8))
    seed: int = 0
    proposals: list[dict[str, Any]] = field(default_factory=list)

    def respond(self, game: MetaGame, seat: int, opponent: np.ndarray) -> tuple[str, float]:
        """Returns (the best candidate for ``seat``, its payoff against the opponent mixed by
        ``opponent``), after adding any LLM proposals to the candidates."""
        from stratagem.solvers.psro import CandidateOracle

        if self.propose and self.backend is not None:
            self.candidates.extend(self._proposals(game, seat))
        return CandidateOracle(tuple(self.candidates)).respond(game, seat, opponent)

    def _proposals(self, game: MetaGame, seat: int) -> list[str]:
        known = [*self.candidates, *game.populations[0], *game.populations[1]]
        words = sorted(set(known) - {ANY})
        chat = [
            {"role": "system", "content": "You suggest negotiation tactics. Answer with one word."},
            {
                "role": "user",
                "content": (
                    f"We are testing instructions for an LLM in a {self.domain.name} dialogue. "
                    f"Tried so far: {', '.join(words)}. Suggest one new instruction, a single "
                    f"adjective not in that list. Answer with the word only."
                ),
            },
        ]
        round_ = len(self.proposals)
        seeds = [derive(self.seed, "propose", seat, round_, i) for i in range(self.propose)]
        assert self.backend is not None
        gens = self.backend.generate([chat] * self.propose, self.sampling, seeds=seeds)
        new = []
        for gen in gens:
            word = _one_word(gen.text)
            status = "ok"
            if word is None or word in known or word in new or word == ANY:
                status = "failed"
            else:
                try:
                    self.domain.check_instruction(word)
                except StratagemError:
                    status = "failed"
            self.proposals.append({"seat": seat, "text": gen.text, "word": word, "status": status})
            if status == "ok" and word is not None:
                new.append(word)
        return new


def _one_word(text: str) -> str | None:
    """The first word of an answer when it looks like an instruction (3–15 letters)."""
    m = re.match(r"\W*([A-Za-z]{3,15})\b", text)
    return m.group(1).lower() if m else None
