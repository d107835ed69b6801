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
  claim leaves of them; compared — the word is "deal" exactly when the written count is above
  0; followed — the answer deals exactly when the word is "deal".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    """Right / scored counts of each step of one answer's check (0 / 0 where none was written)."""

    copied: tuple[int, int] = (0, 0)
    compared: tuple[int, int] = (0, 0)
    followed: tuple[int, int] = (0, 0)

    def __add__(self, other: CheckSteps) -> CheckSteps:
        def plus(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
            return a[0] + b[0], a[1] + b[1]

        return CheckSteps(
            plus(self.copied, other.copied),
            plus(self.compared, other.compared),
            plus(self.followed, other.followed),
        )


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
    named, value, left, word = match.groups()
    top = max(values)
    best = [i for i, v in enumerate(values) if v == top]
    names = [ITEMS.index(n) if n in ITEMS else -1 for n in named.lower().split(" and ")]
    right = names == best and int(value) == top and int(left) == sum(offered[i] for i in best)
    deal = word.lower() == "deal"
    return CheckSteps((int(right), 1), (int(deal == (int(left) > 0)), 1), (int(dealt == deal), 1))
