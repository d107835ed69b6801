"""Reading a written check back, step by step: where a checked answer goes wrong.

A checked answer (``--drills-check``) does three things before the claim probe sees its decision:
it *copies* numbers from the chat (its values, the claimant's stated values, the units the claim
leaves it), *compares* them in one word ("mine", "yours", "the same"; "deal", "refuse"), and
*follows* the word in what it then deals or claims. ``check_steps`` scores each step separately,
each against what was written before it — a word is right when it is right for the numbers the
answer wrote, whether or not those were copied right — so that a warm start's failure can be
placed: numbers not copied, a comparison not made, or a decision that ignores it.

- joint check, per item type written ("Books: 3 to me, 0 to you, so mine."): copied — both
  values are the true ones; compared — the word is the one the two written numbers give;
  followed — when the answer keeps a share and the word is "mine" or "yours", it keeps every unit
  of the type, or none.
- refusal check ("My best: hats, 4 each. Left to me: 0, so I refuse."): copied — the named types
  are the seat's types of highest value, the value is theirs and the count is the units the
  claim leaves of them, each of the three also scored on its own (``named``: the types are the
  best; ``valued``: the value is the named types' own; ``counted``: the count is the units left
  of the named types), so that a wrong copy is placed too; compared — the word is "deal" exactly
  when the written count is above 0; followed — the answer deals exactly when the word is
  "deal".
"""

from __future__ import annotations

import re
from dataclasses import astuple, dataclass

from stratagem.games.dond import ITEMS, Items

_JOINT = re.compile(
    r"(Books|Hats|Balls): (\d+) to me, (\d+) to you, so (mine|yours|the same)\.", re.IGNORECASE
)
_REFUSAL = re.compile(
    r"My best: ([a-z]+(?: and [a-z]+)*), (\d+) each\. Left to me: (\d+), so I (deal|refuse)\.",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CheckSteps:
    """Right / scored counts of each step of one answer's check (0 / 0 where none was written);
    ``named``, ``valued`` and ``counted`` are the parts of a refusal check's copy."""

    copied: tuple[int, int] = (0, 0)
    compared: tuple[int, int] = (0, 0)
    followed: tuple[int, int] = (0, 0)
    named: tuple[int, int] = (0, 0)
    valued: tuple[int, int] = (0, 0)
    counted: tuple[int, int] = (0, 0)

    def __add__(self, other: CheckSteps) -> CheckSteps:
        pairs = zip(astuple(self), astuple(other), strict=True)
        return CheckSteps(*((a[0] + b[0], a[1] + b[1]) for a, b in pairs))


def _word(mine: int, theirs: int) -> str:
    return "mine" if mine > theirs else "yours" if mine < theirs else "the same"


def joint_steps(
    text: str, values: Items, stated: Items, counts: Items, kept: Items | None
) -> CheckSteps:
    """Scores the joint check in ``text`` (module docstring): ``values`` are the writer's,
    ``stated`` the claimant's, ``kept`` the share the answer keeps (None: it keeps none)."""
    copied = compared = followed = acted = 0
    found = _JOINT.findall(text)
    for name, mine, theirs, word in found:
        k = ITEMS.index(name.lower())
        copied += (int(mine), int(theirs)) == (values[k], stated[k])
        compared += word.lower() == _word(int(mine), int(theirs))
        if kept is not None and word.lower() != "the same":
            acted += 1
            followed += kept[k] == (counts[k] if word.lower() == "mine" else 0)
    n = len(found)
    return CheckSteps((copied, n), (compared, n), (followed, acted))


def refusal_steps(text: str, values: Items, offered: Items, dealt: bool) -> CheckSteps:
    """Scores the refusal check in ``text`` (module docstring): ``values`` are the writer's,
    ``offered`` what the claim leaves it, ``dealt`` whether the answer deals."""
    match = _REFUSAL.search(text)
    if match is None:
        return CheckSteps()
    written, value, left, word = match.groups()
    top = max(values)
    best = [i for i, v in enumerate(values) if v == top]
    names = [ITEMS.index(n) if n in ITEMS else None for n in written.lower().split(" and ")]
    known = [i for i in names if i is not None]
    named = names == best
    readable = len(known) == len(names)  # every named type is a type of the game
    valued = readable and all(values[i] == int(value) for i in known)
    counted = readable and int(left) == sum(offered[i] for i in known)
    deal = word.lower() == "deal"
    return CheckSteps(
        (int(named and valued and counted), 1),
        (int(deal == (int(left) > 0)), 1),
        (int(dealt == deal), 1),
        (int(named), 1),
        (int(valued), 1),
        (int(counted), 1),
    )
