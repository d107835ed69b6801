"""Live dialogues steered by a policy, and the elected-steered meta-game from them (seed 003 §4).

A live dialogue is one sampled play of a scenario's game, not a tree: at each turn the writer's
instruction is drawn from its seat's policy (a ``Steer``: the imitation MLP on the embedded
information state, ``CFRSteer`` reading the CFR average policy at the matching information set,
or ``UNSTEERED``, which always says ``any``), chance draws one of the k LLM seeds, and the model
writes the message. All live dialogues of one depth are one batched backend call through the
response cache (the chats, seeds and stop rule of ``tree.depth_round``, so a live message that a
tree already holds costs nothing), then one judge call for the finished ones.

``steered_meta_game`` plays the 2×2 meta-game in which each seat elects the steered or the
unsteered LLM: ``games`` live dialogues per scenario in each cell, with common random numbers
(the i-th game of a scenario uses the same uniform draws for its instructions and seeds in every
cell), payoffs averaged over scenarios and games; the welfare-maximising coarse-correlated
equilibrium gives each seat's mass on the steered LLM.

A message whose generation failed, or a judge answer that did not parse, leaves its dialogue
without a payoff (never 0): ``check_played`` names the scenarios, and since failures are never
cached, running again retries them.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from stratagem.backends.base import Chat, Generation, Sampling
from stratagem.backends.cache import CachedBackend, failed, failure_text
from stratagem.games.dialogue.base import ANY, Domain, Scenario, digest
from stratagem.seeding import derive
from stratagem.solvers.dialogue.expansion import UnsolvedScenarios, check_solvable, expand
from stratagem.solvers.dialogue.judge import JUDGE_SAMPLING, Dialogue, Outcome, judge_dialogues
from stratagem.solvers.dialogue.tree import DEFAULT_SAMPLING, DialogueTree

CELLS = ("steered", "unsteered")


@dataclass(frozen=True)
class LiveState:
    """The writer's information state in a live dialogue: what a steering policy reads."""

    domain: Domain
    scenario: Scenario
    messages: tuple[str, ...]
    seat: int
    own: tuple[str, ...]  # the seat's earlier instructions

    def observation(self) -> str:
        """The state as text, exactly as ``DialogueNode.observation`` writes it (what the
        imitation MLP was trained on)."""
        return self.domain.observation(self.scenario, self.messages, self.seat, self.own)

    def infoset(self) -> str:
        """The state's key, exactly as ``DialogueNode.infoset`` writes it."""
        return f"{self.seat}|{'/'.join(self.own)}|{digest(*self.messages)}"


class Steer(Protocol):
    """A steering policy: a distribution over its instructions at each information state."""

    name: str
    instructions: tuple[str, ...]

    def distributions(self, states: Sequence[LiveState]) -> list[dict[str, float]]:
        """Returns the distribution over ``instructions`` at each state (one batch)."""
        ...


@dataclass
class Unsteered:
    """The unsteered LLM: always ``any``."""

    name: str = "unsteered"
    instructions: tuple[str, ...] = (ANY,)

    def distributions(self, states: Sequence[LiveState]) -> list[dict[str, float]]:
        """``any`` with probability 1 at every state."""
        return [{ANY: 1.0} for _ in states]


UNSTEERED = Unsteered()


@dataclass
class CFRSteer:
    """The CFR average policy of each scenario's solved tree, read at the live state's
    information set. A state the tree does not hold (a message the cache had not seen: possible
    only when the tree was expanded by another model or settings) plays ``any`` and is counted
    in ``off_tree``."""

    policies: Mapping[str, Mapping[str, Mapping[str, float]]]  # scenario id -> infoset -> dist
    instructions: tuple[str, ...]
    name: str = "cfr"
    off_tree: int = 0
    expansion: Any = None  # the trees' ExpansionStats

    def distributions(self, states: Sequence[LiveState]) -> list[dict[str, float]]:
        """The CFR average policy at each state's information set."""
        out = []
        for state in states:
            dist = self.policies.get(state.scenario.id, {}).get(state.infoset())
            if dist is None:
                self.off_tree += 1
                dist = {ANY: 1.0}
            out.append(dict(dist))
        return out


def cfr_steer(
    domain: Domain,
    scenarios: Sequence[Scenario],
    backend: CachedBackend,
    iterations: int,
    algorithm: str = "cfr+",
    **tree_args: Any,
) -> CFRSteer:
    """Expands and solves each scenario's tree (``iterations`` of CFR+ exactly) and returns its
    average policy as a ``Steer``; raises ``UnsolvedScenarios`` when a tree holds a dialogue
    without a payoff."""
    from stratagem.solvers.cfr import ALGORITHMS, CFRSolver

    trees = [DialogueTree(domain, s, backend, **tree_args) for s in scenarios]
    stats = expand(trees)
    check_solvable(trees)
    policies = {}
    for tree in trees:
        solver = CFRSolver(tree.root, ALGORITHMS[algorithm])
        solver.iterate(iterations)
        policies[tree.scenario.id] = solver.average_policy()
    return CFRSteer(policies, domain.instructions, expansion=stats)


@dataclass
class LiveDialogue:
    """One live dialogue: its scenario, game index, meta-game cell and seats' policies, the
    instructions and LLM seed indices drawn per reply, the messages and the outcome."""

    scenario: Scenario
    game: int
    cell: tuple[int, int]  # (seat 0's, seat 1's) index in CELLS
    seats: tuple[Steer, Steer]
    messages: list[str]
    instructions: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    outcome: Outcome | None = None
    pending: bool = False  # finished, waiting for the judge

    def own(self, seat: int) -> tuple[str, ...]:
        """``seat``'s instructions so far (replies alternate, seat 1 first)."""
        return tuple(x for d, x in enumerate(self.instructions) if (1 + d) % 2 == seat)

    def row(self) -> dict[str, Any]:
        """The dialogue as one JSON line of ``dialogues.jsonl``."""
        o = self.outcome
        return {
            "scenario": self.scenario.id,
            "game": self.game,
            "cell": [CELLS[i] for i in self.cell],
            "policies": [s.name for s in self.seats],
            "instructions": self.instructions,
            "seeds": self.seeds,
            "messages": self.messages,
            "payoffs": list(o.values) if o and o.values else None,
            "source": o.source if o else None,
            **({"error": o.error} if o and o.error else {}),
            **({"judge": o.judge_text} if o and o.judge_text else {}),
        }


def draw(dist: Mapping[str, float], u: float) -> str:
    """The instruction at ``u`` ∈ [0, 1) of ``dist``'s cumulative distribution (in its order):
    one uniform draw per turn, shared by every policy, gives common random numbers."""
    names = [a for a, p in dist.items() if p > 0] or list(dist)
    weights = np.array([max(dist[a], 0.0) for a in names], dtype=float)
    if weights.sum() <= 0:
        weights = np.ones(len(names))
    cumulative = np.cumsum(weights / weights.sum())
    return names[min(bisect.bisect_right(cumulative.tolist(), u), len(names) - 1)]


def play(
    domain: Domain,
    dialogues: Sequence[LiveDialogue],
    backend: CachedBackend,
    *,
    replies: int = 2,
    seeds: int = 2,
    seed: int = 0,
    sampling: Sampling = DEFAULT_SAMPLING,
    judge_sampling: Sampling = JUDGE_SAMPLING,
    judge_fallback: bool = True,
) -> None:
    """Plays ``dialogues`` to the end in place: per depth, each policy's distributions in one
    batch, one backend call for every message, then one judge call (see the module docstring).
    The i-th game's turn at depth d draws its instruction with ``derive(seed, "instruction",
    scenario, i, d)`` and its LLM seed index with ``derive(seed, "chance", scenario, i, d)``."""
    values = [derive(seed, "llm", j) for j in range(seeds)]
    rule = domain.stop if domain.structured else None
    stop_key = f"{domain.name}-v{domain.version}" if domain.structured else ""
    for depth in range(replies):
        seat = (1 + depth) % 2
        todo = [d for d in dialogues if d.outcome is None and not d.pending]
        if not todo:
            break
        dists = _distributions(domain, todo, seat)
        chats, row_seeds = _draw_turns(domain, todo, dists, seat, depth, seed, seeds, values)
        gens = backend.generate(
            chats, sampling, seeds=row_seeds, stop=[rule] * len(chats), stop_key=stop_key
        )
        _take_messages(domain, todo, gens, seat, last=depth + 1 == replies)
    _judge_pending(domain, dialogues, backend, judge_sampling, judge_fallback)


def _distributions(
    domain: Domain, todo: Sequence[LiveDialogue], seat: int
) -> dict[int, dict[str, float]]:
    """The distribution of ``seat``'s policy at each dialogue of ``todo`` (keyed by ``id``):
    one ``distributions`` batch per policy."""
    dists: dict[int, dict[str, float]] = {}
    groups: dict[int, list[LiveDialogue]] = {}  # by the writer's policy: one batch each
    for d in todo:
        groups.setdefault(id(d.seats[seat]), []).append(d)
    for members in groups.values():
        states = [
            LiveState(domain, d.scenario, tuple(d.messages), seat, d.own(seat)) for d in members
        ]
        for d, dist in zip(members, members[0].seats[seat].distributions(states), strict=True):
            dists[id(d)] = dist
    return dists


def _draw_turns(
    domain: Domain,
    todo: Sequence[LiveDialogue],
    dists: Mapping[int, Mapping[str, float]],
    seat: int,
    depth: int,
    seed: int,
    seeds: int,
    values: Sequence[int],
) -> tuple[list[Chat], list[int]]:
    """Draws each dialogue's instruction and index among the ``seeds`` LLM seeds for its turn
    at ``depth`` (appended to it); returns the writer's chats and the seed (of ``values``) each
    is sampled with."""
    chats: list[Chat] = []
    row_seeds: list[int] = []
    for d in todo:
        key = (d.scenario.id, d.game, depth)
        u = random.Random(derive(seed, "instruction", *key)).random()
        j = random.Random(derive(seed, "chance", *key)).randrange(seeds)
        d.instructions.append(draw(dists[id(d)], u))
        d.seeds.append(j)
        chats.append(domain.chat(d.scenario, d.messages, seat, d.instructions[-1]))
        row_seeds.append(values[j])
    return chats, row_seeds


def _take_messages(
    domain: Domain,
    todo: Sequence[LiveDialogue],
    gens: Sequence[Generation],
    seat: int,
    *,
    last: bool,
) -> None:
    """Appends each generated message to its dialogue; a failed generation ends it with an
    ``error`` outcome, and a dialogue that ended (or whose ``last`` reply this was) is scored
    exactly or left ``pending`` for the judge."""
    for d, gen in zip(todo, gens, strict=True):
        if failed(gen):
            d.outcome = Outcome(None, "error", error=f"generation failed: {failure_text(gen)}")
            continue
        d.messages.append(domain.clean(gen.text, d.scenario, seat))
        if last or domain.ended(d.scenario, d.messages):
            pay = domain.payoff(d.scenario, d.messages)
            if pay is None:
                d.pending = True
            else:
                d.outcome = Outcome((float(pay[0]), float(pay[1])), "exact")


def _judge_pending(
    domain: Domain,
    dialogues: Sequence[LiveDialogue],
    backend: CachedBackend,
    sampling: Sampling,
    fallback: bool,
) -> None:
    """Judges every ``pending`` dialogue in one call and records its outcome."""
    waiting = [d for d in dialogues if d.pending]
    judged = judge_dialogues(
        backend,
        sampling,
        [Dialogue(domain, d.scenario, tuple(d.messages), fallback) for d in waiting],
    )
    for d, outcome in zip(waiting, judged, strict=True):
        d.outcome, d.pending = outcome, False


@dataclass(frozen=True)
class LiveMetaGame:
    """The 2×2 meta-game "steered vs unsteered LLM" from live dialogues, and its CCE."""

    strategies: tuple[str, str]  # CELLS
    steer: str  # the steering policy's name
    row: tuple[tuple[float, float], tuple[float, float]]  # seat 0's payoffs, seat 0 down
    col: tuple[tuple[float, float], tuple[float, float]]  # seat 1's payoffs
    joint: tuple[tuple[float, float], tuple[float, float]]  # the CCE
    steered_mass: tuple[float, float]  # each seat's marginal mass on the steered LLM
    scenarios: int
    games: int  # live dialogues per scenario and cell


def steered_meta_game(
    domain: Domain,
    scenarios: Sequence[Scenario],
    backend: CachedBackend,
    steer: Steer,
    *,
    games: int = 4,
    **play_args: Any,
) -> tuple[list[LiveDialogue], LiveMetaGame | None]:
    """Plays ``games`` live dialogues per scenario in each cell of the elected-steered
    meta-game (all four cells in the same batched calls) and returns them with the meta-game,
    or None for the meta-game when a dialogue has no payoff (``check_played`` names them)."""
    policies = (steer, UNSTEERED)
    dialogues = [
        LiveDialogue(s, g, (i, j), (policies[i], policies[j]), [s.opening])
        for i, j in itertools.product((0, 1), (0, 1))
        for s in scenarios
        for g in range(games)
    ]
    play(domain, dialogues, backend, **play_args)
    if failed_dialogues(dialogues):
        return dialogues, None
    row, col = np.zeros((2, 2)), np.zeros((2, 2))
    for d in dialogues:
        assert d.outcome is not None and d.outcome.values is not None
        row[d.cell] += d.outcome.values[0]
        col[d.cell] += d.outcome.values[1]
    row, col = row / (len(scenarios) * games), col / (len(scenarios) * games)
    from stratagem.solvers.matrix import cce

    profile = cce(row, col)
    return dialogues, LiveMetaGame(
        strategies=CELLS,
        steer=steer.name,
        row=_pairs(row),
        col=_pairs(col),
        joint=_pairs(profile.joint),
        steered_mass=(float(profile.row[0]), float(profile.col[0])),
        scenarios=len(scenarios),
        games=games,
    )


def failed_dialogues(dialogues: Sequence[LiveDialogue]) -> dict[str, str]:
    """Each scenario with a live dialogue without a payoff, and the first reason."""
    out: dict[str, str] = {}
    for d in dialogues:
        o = d.outcome
        if o is None or o.values is None:
            why = o.error if o and o.error else "the judge's answer did not parse"
            out.setdefault(d.scenario.id, why)
    return out


def check_played(dialogues: Sequence[LiveDialogue]) -> None:
    """Raises ``UnsolvedScenarios`` naming every scenario with a dialogue without a payoff."""
    failures = failed_dialogues(dialogues)
    if failures:
        named = "; ".join(f"{sid}: {why}" for sid, why in failures.items())
        raise UnsolvedScenarios(
            f"{len(failures)} scenarios have live dialogues without a payoff: {named}. "
            "Failed generations are not cached: run the same command again to retry them"
        )


def _pairs(m: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    return (float(m[0, 0]), float(m[0, 1])), (float(m[1, 0]), float(m[1, 1]))
