"""Test doubles for dialogue trees: a scripted backend that sees each row's seed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stratagem.backends.base import Generation
from stratagem.backends.scripted import ScriptedBackend
from stratagem.games.dialogue.base import Scenario
from stratagem.games.dialogue.meeting import Calendar
from stratagem.seeding import derive


class SeededScript(ScriptedBackend):
    """``script(chat, seed index)`` per row; records batch sizes in ``calls`` like its parent."""

    def __init__(self, script: Callable[[list, int], str], seeds: int = 2, **kwargs):
        super().__init__(lambda chat: "", **kwargs)
        self.by_seed = {derive(0, "llm", j): j for j in range(seeds)}
        self.seeded = script

    def generate(self, chats, sampling, *, seeds=None, stop=None):
        self.calls.append(len(chats))
        seeds = seeds or [0] * len(chats)
        out = []
        for chat, seed in zip(chats, seeds, strict=True):
            text = self.seeded(chat, self.by_seed.get(seed, -1))
            out.append(Generation(text=text, tokens=len(text.split())))
        return out


def speaker(chat) -> str:
    return chat[0]["content"].split(",")[0].removeprefix("You are ")


def note(chat) -> str:
    return chat[-1]["content"].rsplit("(Note for", 1)[-1]


def meeting_script(chat, j: int) -> str:
    """Bob (seat 1) and Alice (seat 0) of ``hand_scenario``: see test_tree.py."""
    who, how = speaker(chat), note(chat)
    if who == "Bob":
        if "push for Monday" in how:
            return "Monday is fine.\nACCEPT"
        if "push for Tuesday" in how:
            return "I prefer Tuesday.\nPROPOSE: Tuesday"
        return "Monday is fine.\nACCEPT" if j == 0 else "I prefer Tuesday.\nPROPOSE: Tuesday"
    if "push for Tuesday" in how:
        return "Tuesday then.\nACCEPT"
    return "I insist.\nPROPOSE: Monday"


@pytest.fixture
def hand_scenario() -> Scenario:
    alice = Calendar(("Monday", "Tuesday"), {"Monday": 8, "Tuesday": 4})
    bob = Calendar(("Monday", "Tuesday"), {"Monday": 2, "Tuesday": 6})
    return Scenario(
        "meeting", 0, ("Alice", "Bob"), (alice, bob), "Hi Bob, let us meet.\nPROPOSE: Monday"
    )
