"""The solver tree of one dialogue scenario, expanded lazily a depth at a time (seed 003 §2–3).

A ``DialogueTree`` is the extensive-form game of one scenario of a ``games.dialogue`` domain:

    decision (the writer's seat picks an instruction) → chance (one of k LLM seeds)
    → the LLM writes the message → decision of the other seat → … → terminal (payoff)

Its nodes (``DialogueNode``) satisfy the ``Node`` protocol, so CFR, best response and PSRO run
on it unchanged. Children are generated lazily, a whole depth at a time: asking for any child of
depth d generates every message of depth d in one batched backend call (``depth_round``, which
``expansion.expand`` runs for many trees at once). A message is a function of (history,
instruction, seed): the chat holds the history and the instruction, and sampling is per row and
seeded; the ``CachedBackend`` every call goes through makes its first answer the message from
then on (on a local model the batch shape can change a token: see ``solvers.dialogue``).

A message whose generation failed (a backend error, ``backends.cache.failed``) ends its branch
with an ``error`` outcome: no payoff, the reason recorded, nothing cached. A tree holding one is
not a game to solve (``failures``); running again retries exactly those generations.

An information set of a seat is its own earlier instructions plus the text of every message
(the dialogue is public; the other seat's instructions and the seeds are not), so two seeds that
write the same text lead to the same information set, and perfect recall holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stratagem.backends.base import Chat, Generation, Sampling
from stratagem.backends.cache import CachedBackend, failed, failure_text
from stratagem.games.dialogue.base import Domain, Scenario, digest
from stratagem.seeding import derive
from stratagem.solvers.dialogue.judge import (
    JUDGE_SAMPLING,
    Dialogue,
    GenerationFailure,
    JudgeFailure,
    Outcome,
    judge_dialogues,
)
from stratagem.tree import CHANCE, TERMINAL

Step = tuple[str, int]  # (instruction, seed index)
Branch = tuple[Step, ...]  # the choices that lead to a dialogue: one step per message
Request = tuple[Branch, str, int, Chat, int]  # (path, instruction, seed index, chat, seed)
DEFAULT_SAMPLING = Sampling(temperature=0.8, top_p=0.95, max_new_tokens=48)


def instruction_pair(
    instructions: Sequence[str] | tuple[Sequence[str], Sequence[str]],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each seat's instructions: one sequence is both seats', a pair of sequences one per seat."""
    per_seat = [tuple(x) for x in instructions if not isinstance(x, str)]
    if per_seat:
        return per_seat[0], per_seat[1]
    shared = tuple(x for x in instructions if isinstance(x, str))
    return shared, shared


class DialogueTree:
    """The game tree of one scenario, expanded lazily a depth at a time (see module docstring).

    Args:
        domain: The dialogue domain.
        scenario: The scenario played.
        backend: The model writing messages (and judging), behind a ``CachedBackend``.
        instructions: Each seat's instruction set; one tuple for both, or a pair.
        replies: Messages written after the opening (seat 1 writes the first).
        seeds: LLM seeds per message, k: each chance node's outcomes, equally likely.
        seed: Base seed of the LLM seeds (the j-th seed is ``derive(seed, "llm", j)``).
        sampling: Message sampling (temperature > 0 makes the k seeds differ).
        judge_sampling: The judge's sampling.
        judge_fallback: When a judge answer does not parse, ask the backend's constrained
            choice between the domain's verdicts (recorded as a fallback) instead of failing.
    """

    def __init__(
        self,
        domain: Domain,
        scenario: Scenario,
        backend: CachedBackend,
        *,
        instructions: Sequence[str] | tuple[Sequence[str], Sequence[str]] | None = None,
        replies: int = 2,
        seeds: int = 2,
        seed: int = 0,
        sampling: Sampling = DEFAULT_SAMPLING,
        judge_sampling: Sampling = JUDGE_SAMPLING,
        judge_fallback: bool = True,
    ) -> None:
        if replies < 1 or seeds < 1:
            raise ValueError("a dialogue tree needs at least one reply and one seed")
        pair = instruction_pair(instructions or domain.instructions)
        for seat_instructions in pair:
            if not seat_instructions or len(set(seat_instructions)) != len(seat_instructions):
                raise ValueError(f"instructions must be distinct and non-empty: {pair}")
            for instruction in seat_instructions:
                domain.check_instruction(instruction)
        self.domain, self.scenario, self.backend = domain, scenario, backend
        self.actions = pair
        self.replies, self.k = replies, seeds
        self.seed_values = tuple(derive(seed, "llm", j) for j in range(seeds))
        self.sampling, self.judge_sampling = sampling, judge_sampling
        self.judge_fallback = judge_fallback
        self.history: dict[Branch, tuple[str, ...]] = {(): (scenario.opening,)}
        self.frontier: list[list[Branch]] = [[] for _ in range(replies + 1)]
        self.frontier[0].append(())
        self.outcomes: dict[Branch, Outcome] = {}
        self.pending: dict[Branch, None] = {}  # finished dialogues waiting for the judge (ordered)
        self.depth = 0  # depths generated so far
        self.structured = 0  # messages that hold a structured line
        self.root = DialogueNode(self, ())

    def speaker(self, depth: int) -> int:
        """The seat that writes the message of ``depth`` (the opening was seat 0's)."""
        return (1 + depth) % 2

    def own(self, path: Branch, seat: int) -> tuple[str, ...]:
        """``seat``'s instructions along ``path``."""
        return tuple(s[0] for d, s in enumerate(path) if self.speaker(d) == seat)

    def requests(self, depth: int) -> list[Request]:
        """The messages of ``depth`` to write: (path, instruction, seed index, chat, seed)."""
        seat = self.speaker(depth)
        out: list[Request] = []
        for path in self.frontier[depth]:
            messages = self.history[path]
            for instruction in self.actions[seat]:
                chat = self.domain.chat(self.scenario, messages, seat, instruction)
                for j, value in enumerate(self.seed_values):
                    out.append((path, instruction, j, chat, value))
        return out

    def accept(
        self,
        depth: int,
        requests: Sequence[Request],
        texts: Sequence[str],
        errors: Sequence[str | None] | None = None,
    ) -> None:
        """Stores the messages of ``depth`` and sorts their paths into live and finished; a
        request with an error (its generation failed) ends its branch as an ``error`` outcome."""
        seat, last = self.speaker(depth), depth + 1 == self.replies
        errors = errors if errors is not None else [None] * len(texts)
        for (path, instruction, j, _, _), raw, error in zip(requests, texts, errors, strict=True):
            if error is not None:
                child = (*path, (instruction, j))
                self.history[child] = self.history[path]
                self.outcomes[child] = Outcome(None, "error", error=error)
                continue
            text = self.domain.clean(raw, self.scenario, seat)
            self.structured += self.domain.parse_line(text) is not None
            child = (*path, (instruction, j))
            messages = self.history[path] + (text,)
            self.history[child] = messages
            if last or self.domain.ended(self.scenario, messages):
                pay = self.domain.payoff(self.scenario, messages)
                if pay is None:
                    self.pending[child] = None
                else:
                    self.outcomes[child] = Outcome((float(pay[0]), float(pay[1])), "exact")
            else:
                self.frontier[depth + 1].append(child)
        self.depth = depth + 1

    def ensure(self, depth: int) -> None:
        """Generates every depth up to and including ``depth`` (one backend call each)."""
        for d in range(self.depth, min(depth + 1, self.replies)):
            depth_round([self], d)

    def outcome(self, path: Branch) -> Outcome:
        """The outcome of the finished dialogue ``path`` (judging pending ones first)."""
        if path not in self.outcomes:
            judge_pending([self])
        return self.outcomes[path]

    def failures(self) -> dict[Branch, str]:
        """The dialogues without a payoff and why: a failed generation (its error) or a judge
        answer that did not parse. Empty when every dialogue has a payoff."""
        return {
            path: o.error or f"judge answer did not parse: {o.judge_text[:80]!r}"
            for path, o in self.outcomes.items()
            if o.values is None
        }

    def is_terminal(self, path: Branch) -> bool:
        """Whether the dialogue ``path`` is over (its message was generated)."""
        return path in self.outcomes or path in self.pending

    def nodes(self) -> dict[str, int]:
        """Tree size: decision, chance and terminal nodes, messages and information sets."""
        self.ensure(self.replies - 1)
        decisions = sum(len(f) for f in self.frontier)
        chance = sum(
            len(f) * len(self.actions[self.speaker(d)]) for d, f in enumerate(self.frontier)
        )
        terminals = len(self.outcomes) + len(self.pending)
        keys = {DialogueNode(self, p).infoset() for f in self.frontier for p in f}
        return {
            "nodes": decisions + chance + terminals,
            "decision": decisions,
            "chance": chance,
            "terminal": terminals,
            "messages": len(self.history) - 1,
            "infosets": len(keys),
        }

    def dialogues(self) -> Iterable[dict[str, Any]]:
        """Every finished dialogue: its path, messages and outcome (for the run folder)."""
        for path in sorted(self.outcomes, key=lambda p: [(s[0], s[1]) for s in p]):
            o = self.outcomes[path]
            yield {
                "scenario": self.scenario.id,
                "path": [list(s) for s in path],
                "messages": list(self.history[path]),
                "payoffs": list(o.values) if o.values else None,
                "source": o.source,
                **({"judge": o.judge_text} if o.judge_text else {}),
                **({"error": o.error} if o.error else {}),
            }


@dataclass(frozen=True, eq=False)
class DialogueNode:
    """A node of a ``DialogueTree``: the dialogue ``path`` so far, and, at a chance node, the
    instruction just chosen. Satisfies the ``Node`` protocol."""

    tree: DialogueTree
    path: Branch
    instruction: str | None = None

    @property
    def player(self) -> int:
        """CHANCE after an instruction, TERMINAL when the dialogue is over, else the writer."""
        if self.instruction is not None:
            return CHANCE
        if self.tree.is_terminal(self.path):
            return TERMINAL
        return self.tree.speaker(len(self.path))

    def actions(self) -> tuple[str, ...]:
        """The writer's instructions, the seed labels at a chance node, or ()."""
        player = self.player
        if player == CHANCE:
            return tuple(f"seed{j}" for j in range(self.tree.k))
        return () if player == TERMINAL else self.tree.actions[player]

    def child(self, action: str) -> DialogueNode:
        """The chance node after an instruction, or the dialogue after a seed's message
        (generating the whole depth on first use); ``KeyError`` for an unknown action."""
        if action not in self.actions():
            raise KeyError(action)
        if self.instruction is None:
            return DialogueNode(self.tree, self.path, action)
        self.tree.ensure(len(self.path))
        return DialogueNode(self.tree, (*self.path, (self.instruction, int(action[4:]))))

    def chances(self) -> tuple[float, ...]:
        """Equal probabilities over the k seeds at a chance node, else ()."""
        return (1 / self.tree.k,) * self.tree.k if self.player == CHANCE else ()

    def infoset(self) -> str:
        """Seat, its own earlier instructions and a digest of every message so far."""
        player = self.player
        if player not in (0, 1):
            return ""
        own = "/".join(self.tree.own(self.path, player))
        return f"{player}|{own}|{digest(*self.tree.history[self.path])}"

    def returns(self) -> tuple[float, float]:
        """Both payoffs at a terminal node (raises ``GenerationFailure`` when a generation
        failed, ``JudgeFailure`` when the judge's answer did not parse), else (0.0, 0.0)."""
        if self.player != TERMINAL:
            return 0.0, 0.0
        outcome = self.tree.outcome(self.path)
        if outcome.source == "error":
            raise GenerationFailure(
                f"{self.tree.scenario.id}: {outcome.error}; this dialogue has no payoff "
                "(run again to retry: failures are not cached)"
            )
        if outcome.values is None:
            raise JudgeFailure(
                f"{self.tree.scenario.id}: the judge's answer did not parse "
                f"({outcome.judge_text[:80]!r}); this dialogue has no payoff"
            )
        return outcome.values

    def messages(self) -> tuple[str, ...]:
        """The dialogue so far, opening included."""
        return self.tree.history[self.path]

    def observation(self) -> str:
        """The writer's information state as text (what the imitation policy embeds)."""
        seat = self.player
        return self.tree.domain.observation(
            self.tree.scenario, self.messages(), seat, self.tree.own(self.path, seat)
        )


def depth_round(trees: Sequence[DialogueTree], depth: int) -> None:
    """Generates depth ``depth`` of every tree that needs it, in one backend call."""
    todo = [t for t in trees if t.depth == depth and depth < t.replies]
    if not todo:
        return
    plan = [(t, t.requests(depth)) for t in todo]
    chats, seeds, stops = [], [], []
    for tree, requests in plan:
        rule = tree.domain.stop if tree.domain.structured else None
        for _, _, _, chat, seed in requests:
            chats.append(chat)
            seeds.append(seed)
            stops.append(rule)
    domain = todo[0].domain
    stop_key = f"{domain.name}-v{domain.version}" if domain.structured else ""
    gens = (
        todo[0].backend.generate(
            chats, todo[0].sampling, seeds=seeds, stop=stops, stop_key=stop_key
        )
        if chats
        else []
    )
    at = 0
    for tree, requests in plan:
        mine: list[Generation] = gens[at : at + len(requests)]
        errors = [f"generation failed: {failure_text(g)}" if failed(g) else None for g in mine]
        tree.accept(depth, requests, [g.text for g in mine], errors)
        at += len(requests)


def judge_pending(trees: Sequence[DialogueTree]) -> None:
    """Scores every pending dialogue of ``trees`` with ``judge.judge_dialogues`` (one judge call
    for all of them, then at most one constrained-choice call), with the first tree's backend
    and judge sampling."""
    pending = [(t, p) for t in trees for p in t.pending]
    if not pending:
        return
    dialogues = [
        Dialogue(tree.domain, tree.scenario, tree.history[path], tree.judge_fallback)
        for tree, path in pending
    ]
    outcomes = judge_dialogues(trees[0].backend, trees[0].judge_sampling, dialogues)
    for (tree, path), outcome in zip(pending, outcomes, strict=True):
        tree.outcomes[path] = outcome
    for tree in trees:
        tree.pending = {p: None for p in tree.pending if p not in tree.outcomes}
