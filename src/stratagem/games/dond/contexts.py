"""Deal or No Deal contexts and scores: item counts, private values, divisions (SPEC §7).

Contexts: counts ≥ 1 each, 5–7 items in all; each value vector non-negative with
``Σ count·value = 10``; every item type valued by at least one seat; no division gives both seats
10. All such ordered pairs are enumerated once (``all_contexts``); a file in the original DoND
context format can replace them (``load_contexts``), each loaded context checked. A seeded split
holds about a tenth of them out for evaluation (``split_contexts``): what trains (self-play's
games, drills, demonstrations) is played on the other side.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.seeding import derive

Items = tuple[int, int, int]  # books, hats, balls

ITEMS = ("books", "hats", "balls")
SINGULAR = ("book", "hat", "ball")
TOTAL_VALUE = 10  # every seat's items are worth this much to it in all
MIN_ITEMS, MAX_ITEMS = 5, 7  # items in the pool
MAX_NUMBER = 999  # beyond, a count or value is refused without being printed


@dataclass(frozen=True, slots=True)
class Context:
    """The item counts and each seat's private values (books, hats, balls)."""

    counts: Items
    values: tuple[Items, Items]

    def to_dict(self) -> dict[str, Any]:
        """Returns ``{"counts": [...], "values": [[...], [...]]}`` (the trace's scenario)."""
        return {"counts": list(self.counts), "values": [list(v) for v in self.values]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Context:
        """Returns the context a ``to_dict`` mapping holds.

        Raises:
            ConfigError: the mapping lacks three counts or two vectors of three values.
        """
        try:
            counts = _items(data["counts"])
            values = (_items(data["values"][0]), _items(data["values"][1]))
        except (KeyError, IndexError, TypeError, ValueError):
            raise ConfigError(
                "dond: a scenario is {'counts': [b, h, c], 'values': [[...], [...]]}"
            ) from None
        if len(data["values"]) != 2:
            raise ConfigError("dond: a scenario has exactly two value vectors")
        return cls(counts, values)

    def mirror(self) -> Context:
        """The same game seen from the other seat: the counts, the two value vectors swapped."""
        return Context(self.counts, (self.values[1], self.values[0]))

    @property
    def id(self) -> str:
        """The context's id, what pairs games by context: counts, then seat 0's and seat 1's
        values, e.g. ``"1,2,4|2,1,1|4,2,0"``."""
        return "|".join(",".join(map(str, xs)) for xs in (self.counts, *self.values))


def context_id(scenario: Context | Mapping[str, Any]) -> str:
    """The ``Context.id`` of a context or of its dict form (a trace's ``scenario``).

    Raises:
        ConfigError: a malformed dict form.
    """
    return (scenario if isinstance(scenario, Context) else Context.from_dict(scenario)).id


def _items(xs: Sequence[Any]) -> Items:
    if len(xs) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) for x in xs):
        raise ValueError("three integers")
    return (xs[0], xs[1], xs[2])


def score(values: Items, share: Items) -> int:
    """Returns the value of ``share`` (counts of books, hats, balls) under ``values``."""
    return sum(v * n for v, n in zip(values, share, strict=True))


def complement(counts: Items, share: Items) -> Items:
    """Returns what is left of ``counts`` when one seat keeps ``share``."""
    return (counts[0] - share[0], counts[1] - share[1], counts[2] - share[2])


def divisions(counts: Items) -> Iterator[Items]:
    """Every share one seat may keep (each count from 0 to what exists), books slowest."""
    yield from itertools.product(*(range(n + 1) for n in counts))


def joint_values(counts: Items, values: Sequence[Items], seat: int = 0) -> dict[Items, int]:
    """Each share ``seat`` may keep -> the joint value of that division: both seats' item scores
    added, each seat's with its own values (``values[0]`` for seat 0, ``values[1]`` for seat 1).
    A division of the highest joint value is *joint-best*: what λ = 1 rewards."""
    return {
        s: score(values[seat], s) + score(values[1 - seat], complement(counts, s))
        for s in divisions(counts)
    }


def context_problems(ctx: Context) -> list[str]:
    """Returns the SPEC §7 criteria ``ctx`` breaks (empty when it is valid).

    The last criterion, "no division gives both seats 10", is checked as "some item type is
    valued by both seats": a seat scores 10 exactly when it gets every unit it values, so both can
    only when no type is valued by both (``tests/games/test_dond.py`` checks the equivalence
    against the divisions themselves).
    """
    problems = []
    counts, (a, b) = ctx.counts, ctx.values
    if any(abs(x) > MAX_NUMBER for x in (*counts, *a, *b)):  # the messages below print them
        return [f"a count or value is beyond ±{MAX_NUMBER} (counts are 1-{MAX_ITEMS}, values 0-10)"]
    if min(counts) < 1 or not MIN_ITEMS <= sum(counts) <= MAX_ITEMS:
        problems.append(
            f"counts {list(counts)}: each must be at least 1, {MIN_ITEMS}-{MAX_ITEMS} in all"
        )
    for seat, values in enumerate((a, b)):
        if min(values) < 0:
            problems.append(f"seat {seat} has a negative value")
        elif score(values, counts) != TOTAL_VALUE:
            problems.append(f"seat {seat}'s items are worth {score(values, counts)}, not 10")
    if any(x == 0 and y == 0 for x, y in zip(a, b, strict=True)):
        problems.append("an item type is worth nothing to both seats")
    if not any(x > 0 and y > 0 for x, y in zip(a, b, strict=True)):
        problems.append("a division gives both seats 10 (no item type is valued by both)")
    return problems


@functools.cache
def all_contexts() -> tuple[Context, ...]:
    """Every valid context (ordered pairs of value vectors), enumerated once, in a fixed order."""
    out = []
    for counts in itertools.product(range(1, MAX_ITEMS + 1), repeat=3):
        if not MIN_ITEMS <= sum(counts) <= MAX_ITEMS:
            continue
        vectors = [
            v
            for v in itertools.product(range(TOTAL_VALUE + 1), repeat=3)
            if score(v, counts) == TOTAL_VALUE  # type: ignore[arg-type]
        ]
        for a, b in itertools.product(vectors, repeat=2):
            ctx = Context(counts, (a, b))  # type: ignore[arg-type]
            if not context_problems(ctx):
                out.append(ctx)
    return tuple(out)


EVAL_SHARE = 0.1  # of the contexts, held out for evaluation


@dataclass(frozen=True)
class ContextSplit:
    """The contexts training games are played on and those evaluation games are played on:
    disjoint (``split_contexts``)."""

    train: tuple[Context, ...]
    held_out: tuple[Context, ...]

    def draw(self, held_out: bool, seed: int) -> Context:
        """Returns the context of a game seeded ``seed``, from the held-out or training side."""
        pool = self.held_out if held_out else self.train
        return random.Random(derive(seed, "context")).choice(pool)

    def without(self, used: Collection[Context]) -> ContextSplit:
        """This split with ``used`` and their mirrors (the same game seen from the other seat)
        taken off the held-out side: where a second set of evaluation games, independent of the
        first, draws its contexts.

        Raises:
            ConfigError: no held-out context would be left.
        """
        taken = set(used) | {c.mirror() for c in used}
        rest = tuple(c for c in self.held_out if c not in taken)
        if not rest:
            raise ConfigError(
                f"all {len(self.held_out)} held-out contexts are evaluation contexts already: "
                "none is left for a second set of evaluation games"
            )
        return ContextSplit(self.train, rest)

    def draw_avoiding(self, avoid: Collection[Context], seed: int) -> tuple[Context, bool]:
        """The held-out context of a game seeded ``seed`` that is neither in ``avoid`` nor the
        mirror of one, and whether it was drawn again.

        It is ``draw(held_out=True, seed=seed)`` whenever that one is not avoided, so that the
        games of a set that avoids some contexts are those of one that avoids none except where
        they must differ; an avoided one is drawn again, by the same seed, from ``without(avoid)``.

        Raises:
            ConfigError: ``avoid`` and its mirrors are every held-out context.
        """
        context = self.draw(held_out=True, seed=seed)
        if context not in avoid and context.mirror() not in avoid:
            return context, False
        return self.without(avoid).draw(held_out=True, seed=seed), True


def split_contexts(
    contexts: Sequence[Context], seed: int, share: float = EVAL_SHARE
) -> ContextSplit:
    """Splits ``contexts`` by a hash seeded by ``seed``: about ``share`` of them are held out for
    evaluation, the rest are for training, none on both sides. A context and its mirror (the
    same counts, the two value vectors swapped: the same game with the seats exchanged) fall on
    the same side, so no evaluation game is a training game seen from the other seat.

    Raises:
        ConfigError: a side would be empty (too few contexts to hold some out).
    """
    scale = 2**63
    train: list[Context] = []
    held_out: list[Context] = []
    for ctx in contexts:
        key = (ctx.counts, tuple(sorted(ctx.values)))
        (held_out if derive(seed, "selfplay-held-out", key) < share * scale else train).append(ctx)
    if not train or not held_out:
        raise ConfigError(
            f"{len(contexts)} contexts are too few to hold {share:.0%} out for evaluation and "
            "train on the rest"
        )
    return ContextSplit(tuple(train), tuple(held_out))


@dataclass(frozen=True, slots=True)
class LoadedContexts:
    """The contexts of a file in the original DoND format, those that failed (by line), and the
    SHA-256 of the bytes read (what names the file's content in run fingerprints)."""

    contexts: tuple[Context, ...]
    failures: tuple[str, ...]  # "lines 3-4: reason", one per failed context
    sha256: str = ""


def load_contexts(path: str | Path) -> LoadedContexts:
    """Reads a context file of the original DoND release and checks every context.

    Each non-empty line is one seat's view, six integers ``count value count value count value``
    (books, hats, balls); consecutive lines are the two views of one game and must show the same
    counts. A pair that is malformed or breaks a criterion is a failure (left out, reported).
    A pair whose two views show different counts, or a last line without its pair, means the
    pairing itself is off (a line missing or extra): every later pair would join two games, so
    the file is refused, naming the line, instead of being read misaligned.

    Raises:
        ConfigError: the file cannot be read, or its lines do not pair up.
    """
    try:
        data = Path(path).read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"dond: cannot read the context file {path}: {exc}") from None
    lines = [(i, line.split()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    contexts, failures = [], []
    for k in range(0, len(lines), 2):
        pair = lines[k : k + 2]
        where = "-".join(str(i) for i, _ in pair)
        if len(pair) < 2:
            raise ConfigError(
                f"dond: {path} line {where} has no pair: the file has an odd number of lines "
                f"({len(lines)}), so a line is missing or extra; each game is two consecutive lines"
            )
        try:
            views = [[int(x) for x in words] for _, words in pair]
        except ValueError:
            failures.append(f"lines {where}: not integers")
            continue
        if any(len(v) != 6 for v in views):
            failures.append(f"lines {where}: each line needs six integers")
            continue
        if any(abs(x) > MAX_NUMBER for v in views for x in v):  # never printed, nor compared
            failures.append(f"lines {where}: a count or value is beyond ±{MAX_NUMBER}")
            continue
        counts = [tuple(v[0::2]) for v in views]
        if counts[0] != counts[1]:
            raise ConfigError(
                f"dond: {path} lines {where} show different counts ({list(counts[0])} and "
                f"{list(counts[1])}): the two views of one game share its counts, so the pairing "
                f"is off here (a line missing or extra at or before line {pair[0][0]})"
            )
        ctx = Context(counts[0], (tuple(views[0][1::2]), tuple(views[1][1::2])))  # type: ignore[arg-type]
        problems = context_problems(ctx)
        if problems:
            failures.append(f"lines {where}: " + "; ".join(problems))
        else:
            contexts.append(ctx)
    return LoadedContexts(tuple(contexts), tuple(failures), hashlib.sha256(data).hexdigest())


def pool_text(counts: Items) -> str:
    """Returns the pool in words: ``5 books, 1 hat and 2 balls``."""
    named = [f"{n} {SINGULAR[i] if n == 1 else ITEMS[i]}" for i, n in enumerate(counts)]
    return f"{named[0]}, {named[1]} and {named[2]}"


def item_scores(
    counts: Items, values: Sequence[Items], proposals: Sequence[Items | None]
) -> tuple[int, int]:
    """Returns each seat's item score: its own value of its own proposal when the proposals are
    complementary (sum to ``counts``), else 0 for both."""
    if not agreed(counts, proposals):
        return 0, 0
    return score(values[0], proposals[0]), score(values[1], proposals[1])  # type: ignore[arg-type]


def agreed(counts: Items, proposals: Sequence[Items | None]) -> bool:
    """Whether both seats proposed and their proposals sum to ``counts``."""
    a, b = proposals
    return (
        a is not None
        and b is not None
        and all(x + y == n for x, y, n in zip(a, b, counts, strict=True))
    )


def objective_scores(items: tuple[int, int], lam: float) -> tuple[float, float]:
    """Returns the payoffs ``R_i + λ·R_j`` of the two seats from their item scores."""
    r0, r1 = items
    return float(r0 + lam * r1), float(r1 + lam * r0)


def payoff_bounds(lam: float) -> tuple[float, float]:
    """Returns the range of ``R_i + λ·R_j`` with both item scores in [0, 10]."""
    return min(0.0, TOTAL_VALUE * lam), TOTAL_VALUE + max(0.0, TOTAL_VALUE * lam)
