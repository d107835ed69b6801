"""LLM-expanded dialogue trees (seed 003 §2–3; SPEC §9): the solver tree of a dialogue game.

A ``DialogueTree`` is the extensive-form game of one scenario of a ``games.dialogue`` domain:

    decision (the writer's player picks an instruction) → chance (one of k LLM seeds)
    → the LLM writes the message → decision of the other seat → … → terminal (payoff)

Its nodes (``DialogueNode``) satisfy the ``Node`` protocol, so CFR, best response and PSRO run
on it unchanged. Children are generated lazily, a whole depth at a time: asking for any child of
depth d generates every message of depth d in one batched backend call. ``expand`` does the same
breadth first for many trees at once (one call per depth for the whole frontier of every tree,
then one call for the judge). A message is a function of (history, instruction, seed): the
chat holds the history and the instruction, and sampling is per row and seeded. On a local
model the batch it is written in can still change it (measured on the embedded SmolLM2: the
same chat and seed alone or in a batch of three differed in 1 of 3 rows, sampled or greedy; the
batch shape changes the logits in their last bits, and a token can follow). Every call goes
through ``CachedBackend``, a persistent cache keyed by (model id, chat, sampling, seed), whose
first answer is the message from then on, so a rerun, a second solver or a PSRO cell that
shares a prefix costs no model call and sees the same text.

An information set of a seat is its own earlier instructions plus the text of every message
(the dialogue is public; the other seat's instructions and the seeds are not), so two seeds that
write the same text lead to the same information set, and perfect recall holds.

PSRO over instruction strings (SPEC §9) also lives here, as it is tree expansion restricted to
one instruction per seat: ``instruction_payoffs`` expands, for each pair of instructions and each
scenario, the tree in which each seat always uses its instruction (every seed path, so the
expectation over the k seeds is exact) and averages the expected returns over scenarios;
``InstructionOracle`` best-responds with candidates from a list and, optionally, new ones the
LLM proposes (seed 003 Alg. 1).

Departures from OpenSpiel's ``chat_games``: a judge answer that does not parse is a recorded
failure (or a recorded constrained fallback), never a payoff of 0; the tree is expanded breadth
first in batches instead of one message per ``apply_action``; messages are cached on disk.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from stratagem.backends.base import Chat, Generation, Sampling
from stratagem.backends.cache import ResponseCache, cache_key
from stratagem.errors import StratagemError
from stratagem.games.dialogue.base import ANY, Domain, Scenario, digest
from stratagem.seeding import derive
from stratagem.solvers.tree import expected_returns
from stratagem.tree import CHANCE, TERMINAL, infosets

if TYPE_CHECKING:
    from stratagem.solvers.psro import Evaluate, MetaGame

Step = tuple[str, int]  # (instruction, seed index)
Branch = tuple[Step, ...]  # the choices that lead to a dialogue: one step per message
DEFAULT_SAMPLING = Sampling(temperature=0.8, top_p=0.95, max_new_tokens=48)
JUDGE_SAMPLING = Sampling(temperature=0.0, max_new_tokens=64)


class JudgeFailure(StratagemError, RuntimeError):
    """A payoff was asked of a dialogue whose judge answer did not parse."""

    exit_code = 1


@dataclass
class Usage:
    """What a ``CachedBackend`` has done: backend calls, completions, cache hits, seconds."""

    calls: int = 0  # generate / choice_probs calls that reached the backend
    generated: int = 0  # completions (or distributions) the backend computed
    hits: int = 0  # answers served from the cache
    tokens: int = 0  # tokens the backend generated
    seconds: float = 0.0  # time spent inside backend calls
    batches: list[int] = field(default_factory=list)  # size of each backend call

    def snapshot(self) -> Usage:
        """A copy (to subtract later)."""
        return Usage(
            self.calls, self.generated, self.hits, self.tokens, self.seconds, list(self.batches)
        )

    def since(self, before: Usage) -> Usage:
        """The usage accrued after ``before``."""
        return Usage(
            self.calls - before.calls,
            self.generated - before.generated,
            self.hits - before.hits,
            self.tokens - before.tokens,
            self.seconds - before.seconds,
            self.batches[len(before.batches) :],
        )


class CachedBackend:
    """Any backend behind a persistent response cache (``backends.cache.ResponseCache``).

    The key is (model id, chat, sampling, seed, stop rule); with greedy sampling the seed is left
    out, since it cannot change the text. Misses are deduplicated and sent in one backend call;
    a call whose answers are all cached never reaches the backend.

    Args:
        backend: Any ``Backend`` (hf, openai, scripted).
        cache: A ``ResponseCache``, a path to one, or None to keep answers in memory only.
    """

    def __init__(self, backend: Any, cache: ResponseCache | str | Path | None = None) -> None:
        self.backend = backend
        self.model_id = backend.model_id
        self.cache = ResponseCache(cache) if isinstance(cache, str | Path) else cache
        self.memory: dict[str, dict[str, Any]] = {}
        self.usage = Usage()

    def _get(self, key: str) -> dict[str, Any] | None:
        hit = self.memory.get(key)
        if hit is None and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.memory[key] = hit
        return hit

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self.memory[key] = value
        if self.cache is not None:
            self.cache.put(key, value)

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[Callable[[str], bool] | None] | None = None,
        stop_key: str = "",
    ) -> list[Generation]:
        """Returns one completion per chat, from the cache where possible, the rest from one
        backend call. ``stop_key`` names the stop rule (it changes where text ends)."""
        seeds = list(seeds) if seeds is not None else [0] * len(chats)
        keys = [
            cache_key(
                kind="generate",
                model=self.model_id,
                chat=[dict(m) for m in chat],
                sampling=asdict(sampling),
                seed=None if sampling.greedy else int(seed),
                stop=stop_key,
            )
            for chat, seed in zip(chats, seeds, strict=True)
        ]
        missing: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key not in missing and self._get(key) is None:
                missing[key] = i
        self.usage.hits += len(keys) - sum(1 for k in keys if k in missing)
        if missing:
            idx = list(missing.values())
            start = time.perf_counter()
            gens = self.backend.generate(
                [chats[i] for i in idx],
                sampling,
                seeds=[seeds[i] for i in idx],
                stop=[stop[i] for i in idx] if stop is not None else None,
            )
            self.usage.seconds += time.perf_counter() - start
            self.usage.calls += 1
            self.usage.batches.append(len(idx))
            self.usage.generated += len(idx)
            for key, gen in zip(missing, gens, strict=True):
                self.usage.tokens += gen.tokens
                self._put(
                    key, {"text": gen.text, "tokens": gen.tokens, "finish": gen.finish_reason}
                )
        out = []
        for key in keys:
            hit = self.memory[key]
            out.append(
                Generation(text=hit["text"], tokens=hit["tokens"], finish_reason=hit["finish"])
            )
        return out

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns the backend's constrained distribution over each chat's choices (cached)."""
        keys = [
            cache_key(kind="choices", model=self.model_id, chat=[dict(m) for m in c], choices=cs)
            for c, cs in zip(chats, choices, strict=True)
        ]
        missing = {k: i for i, k in enumerate(keys) if self._get(k) is None}
        self.usage.hits += len(keys) - len(missing)
        if missing:
            idx = list(missing.values())
            start = time.perf_counter()
            probs = self.backend.choice_probs([chats[i] for i in idx], [choices[i] for i in idx])
            self.usage.seconds += time.perf_counter() - start
            self.usage.calls += 1
            self.usage.batches.append(len(idx))
            self.usage.generated += len(idx)
            for key, p in zip(missing, probs, strict=True):
                self._put(key, {"probs": {k: float(v) for k, v in p.items()}})
        return [dict(self.memory[k]["probs"]) for k in keys]


@dataclass(frozen=True)
class Outcome:
    """A finished dialogue's payoff and where it came from."""

    values: tuple[float, float] | None  # None when the judge failed
    source: Literal["exact", "judge", "fallback", "failed"]
    judge_text: str = ""


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
        instructions = instructions or domain.instructions
        if instructions and not isinstance(instructions[0], str):
            pair = tuple(tuple(x) for x in instructions)  # type: ignore[union-attr]
        else:
            pair = (tuple(instructions), tuple(instructions))  # type: ignore[arg-type]
        for seat_instructions in pair:
            if not seat_instructions or len(set(seat_instructions)) != len(seat_instructions):
                raise ValueError(f"instructions must be distinct and non-empty: {pair}")
            for instruction in seat_instructions:
                domain.check_instruction(instruction)
        self.domain, self.scenario, self.backend = domain, scenario, backend
        self.actions: tuple[tuple[str, ...], tuple[str, ...]] = pair  # type: ignore[assignment]
        self.replies, self.k = replies, seeds
        self.seed_values = tuple(derive(seed, "llm", j) for j in range(seeds))
        self.sampling, self.judge_sampling = sampling, judge_sampling
        self.judge_fallback = judge_fallback
        self.history: dict[Branch, tuple[str, ...]] = {(): (scenario.opening,)}
        self.frontier: list[list[Branch]] = [[()]] + [[] for _ in range(replies)]
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

    def requests(self, depth: int) -> list[tuple[Branch, str, int, Chat, int]]:
        """The messages of ``depth`` to write: (path, instruction, seed index, chat, seed)."""
        seat = self.speaker(depth)
        out = []
        for path in self.frontier[depth]:
            messages = self.history[path]
            for instruction in self.actions[seat]:
                chat = self.domain.chat(self.scenario, messages, seat, instruction)
                for j, value in enumerate(self.seed_values):
                    out.append((path, instruction, j, chat, value))
        return out

    def accept(self, depth: int, requests: Sequence[tuple], texts: Sequence[str]) -> None:
        """Stores the messages of ``depth`` and sorts their paths into live and finished."""
        seat, last = self.speaker(depth), depth + 1 == self.replies
        for (path, instruction, j, _, _), raw in zip(requests, texts, strict=True):
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
            _depth_round([self], d)

    def outcome(self, path: Branch) -> Outcome:
        """The outcome of the finished dialogue ``path`` (judging pending ones first)."""
        if path not in self.outcomes:
            judge([self])
        return self.outcomes[path]

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
        """Both payoffs at a terminal node (raises ``JudgeFailure`` when the judge failed),
        else (0.0, 0.0)."""
        if self.player != TERMINAL:
            return 0.0, 0.0
        outcome = self.tree.outcome(self.path)
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


@dataclass(frozen=True)
class ExpansionStats:
    """What an expansion cost: tree sizes, model calls, cache hits, judge results, seconds."""

    trees: int
    nodes: int
    decision: int
    chance: int
    terminal: int
    messages: int
    infosets: int
    model_calls: int  # backend calls (message depths and judge rounds that missed the cache)
    generated: int  # completions the backend computed
    cache_hits: int
    tokens: int
    structured: int  # messages holding a structured line
    judged: int  # dialogues scored by the judge (parsed answers)
    judge_fallbacks: int
    judge_failures: int
    seconds: float
    batches: tuple[int, ...]  # size of each backend call, in order


def _depth_round(trees: Sequence[DialogueTree], depth: int) -> None:
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
        tree.accept(depth, requests, [g.text for g in gens[at : at + len(requests)]])
        at += len(requests)


def expand(trees: Sequence[DialogueTree]) -> ExpansionStats:
    """Expands ``trees`` breadth first, one backend call per depth for all their frontiers, then
    judges their finished dialogues in one more call; returns what it cost.

    All trees must share one backend, sampling and domain (that is what one call can serve).
    """
    if not trees:
        raise ValueError("expand needs at least one tree")
    first = trees[0]
    for tree in trees:
        if (tree.backend, tree.sampling, tree.domain.name) != (
            first.backend,
            first.sampling,
            first.domain.name,
        ):
            raise ValueError("trees expanded together must share backend, sampling and domain")
    before = first.backend.usage.snapshot()
    start = time.perf_counter()
    for d in range(max(t.replies for t in trees)):
        _depth_round(trees, d)
    judge(trees)
    seconds = time.perf_counter() - start
    return stats(trees, first.backend.usage.since(before), seconds)


def stats(trees: Sequence[DialogueTree], usage: Usage, seconds: float) -> ExpansionStats:
    """The ``ExpansionStats`` of ``trees`` after a backend ``usage``."""
    sizes = [t.nodes() for t in trees]
    total = {
        k: sum(s[k] for s in sizes)
        for k in ("nodes", "decision", "chance", "terminal", "messages", "infosets")
    }
    sources = [o.source for t in trees for o in t.outcomes.values()]
    return ExpansionStats(
        trees=len(trees),
        **total,
        model_calls=usage.calls,
        generated=usage.generated,
        cache_hits=usage.hits,
        tokens=usage.tokens,
        structured=sum(t.structured for t in trees),
        judged=sources.count("judge"),
        judge_fallbacks=sources.count("fallback"),
        judge_failures=sources.count("failed"),
        seconds=seconds,
        batches=tuple(usage.batches),
    )


def judge(trees: Sequence[DialogueTree]) -> None:
    """Scores every pending dialogue of ``trees``: one judge call for all of them, then, for
    answers that do not parse and where the domain has a closed verdict set and fallback is on,
    one constrained-choice call. What still does not parse is recorded as ``failed``."""
    pending = [(t, p) for t in trees for p in t.pending]
    if not pending:
        return
    backend = trees[0].backend
    chats, owners = [], []
    for n, (tree, path) in enumerate(pending):
        for chat in tree.domain.judge_chats(tree.scenario, tree.history[path]):
            chats.append(chat)
            owners.append(n)
    seeds = [derive(0, "judge", i) for i in range(len(chats))]
    gens = backend.generate(chats, trees[0].judge_sampling, seeds=seeds)
    answers: list[list[str]] = [[] for _ in pending]
    for n, gen in zip(owners, gens, strict=True):
        answers[n].append(gen.text)
    retry = []
    for (tree, path), texts in zip(pending, answers, strict=True):
        verdict = tree.domain.parse_judgement(tree.scenario, texts)
        text = "\n---\n".join(texts)
        if verdict.value is not None:
            tree.outcomes[path] = Outcome(tuple(map(float, verdict.value)), "judge", text)
        elif tree.judge_fallback and tree.domain.judge_choices(tree.scenario):
            retry.append((tree, path, text))
        else:
            tree.outcomes[path] = Outcome(None, "failed", text)
    if retry:
        options = [tuple(t.domain.judge_choices(t.scenario) or ()) for t, _, _ in retry]
        chats = [
            t.domain.judge_chats(t.scenario, t.history[p])[0]
            + [{"role": "assistant", "content": text}]
            + [{"role": "user", "content": f"Answer with one of: {', '.join(choices)}."}]
            for (t, p, text), choices in zip(retry, options, strict=True)
        ]
        dists = backend.choice_probs(chats, options)
        for (tree, path, text), dist in zip(retry, dists, strict=True):
            pick = max(dist, key=lambda c: (dist[c], -list(dist).index(c)))
            values = tree.domain.judgement_from_choice(tree.scenario, pick)
            tree.outcomes[path] = Outcome(values, "fallback", f"{text}\n[fallback: {pick}]")
    for tree in trees:
        tree.pending = {p: None for p in tree.pending if p not in tree.outcomes}


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
            if status == "ok":
                new.append(word)  # type: ignore[arg-type]
        return new


def _one_word(text: str) -> str | None:
    """The first word of an answer when it looks like an instruction (3–15 letters)."""
    m = re.match(r"\W*([A-Za-z]{3,15})\b", text)
    return m.group(1).lower() if m else None
