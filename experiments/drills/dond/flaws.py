"""Flawed opening claims for the joint drills of ``dond``.

Flawed-claim drills (``dond.drills(flawed=True)``, ``python -m experiments.drills --drills-joint
--drills-flawed``) break a shortcut the other drills leave open. Every claim they show writes the
reader's share as the exact complement of the writer's, so copying the claim's first share back into
a deal is always right there; a 135M model that learned them opens with claims whose two shares do
not add up (a count miscomputed) and deals on them verbatim, and both seats then propose a division
that fails (docs/results/dond.md: most failed λ = 1 self-play games of the CPU runs). Here a third
of the claims the drills' seats write — the claimant's opening and the accepter's counter-claim
alike — write the reader's share one unit of one item type off (left to no one, or given to both),
and the seat that answers first names the flaw ("That leaves 1 ball to no one." / "That gives 1 ball
to both of us.") and then answers the share the claim asks for, as it would an unflawed one: a deal
writing the true complement, or a counter-claim. In the 135M model's failed games it is the
counter-claim that does not add up and the claimant that deals on it verbatim
(docs/results/dond.md), so both claims are drilled. A flawed claim stays in its writer's chat
without loss (marked as an answer the game refused, which ``train sft`` masks): it is not something
to learn, but everything around it is. (A first version flawed only the opening claim and dropped
the claimant's chat of those games; its start failed more often, through perspective errors in the
claimant's deal on the counter-claim: docs/results/dond.md.)
"""

from __future__ import annotations

import random
from typing import cast

from stratagem.games.dond import ITEMS, Items, complement
from stratagem.strategies.dond.talk import claim_in, shares_in

FLAW_RATE = 1 / 3  # of flawed-claim drills' opening claims


def written_rest(message: str) -> Items | None:
    """The reader's share a claim message writes (its first share), or None."""
    shares = shares_in(message)
    return shares[0] if len(shares) == 2 else None


def claim_flaw(counts: Items, message: str) -> str | None:
    """What is wrong with the opening claim ``message`` on a pool of ``counts``: the units its two
    shares leave to no one or give to both ("That leaves 1 ball to no one."), or None when they
    add up (or it is not a claim of two shares)."""
    claimed, rest = claim_in(message), written_rest(message)
    if claimed is None or rest is None:
        return None
    parts = []
    for item, n, mine, theirs in zip(ITEMS, counts, claimed, rest, strict=True):
        missing = n - mine - theirs
        if missing:
            units = f"{abs(missing)} {item if abs(missing) > 1 else item.removesuffix('s')}"
            parts.append(
                f"That leaves {units} to no one."
                if missing > 0
                else f"That gives {units} to both of us."
            )
    return " ".join(parts) or None


def flawed_rest(counts: Items, share: Items, rng: random.Random) -> Items:
    """The complement of ``share``, one unit of one item type off: one fewer (left to no one)
    where the complement has a unit, one more (given to both) where ``share`` has one."""
    rest = list(complement(counts, share))
    moves = [(i, -1) for i in range(3) if rest[i]] + [(i, +1) for i in range(3) if share[i]]
    item, delta = rng.choice(moves)
    rest[item] += delta
    return cast(Items, tuple(rest))
