"""gen-sft marks what ``train sft`` must not learn: refused answers and aborted games."""

from __future__ import annotations

from stratagem.agent import Decision
from stratagem.game import Invalid
from stratagem.strategies import get_strategy
from stratagem.training.sft.data import simulated_chats
from stratagem.training.sft.trainer import chat_tokens  # noqa: F401  (the reader of the markers)


class Fumbler:
    """A FairSplit that first answers every turn without a prefix (refused, then retried), or,
    with ``always``, never answers validly (the game aborts after five refusals)."""

    def __init__(self, game, always: bool = False):
        self.inner = get_strategy("dond", "FairSplit")
        self.name = "Fumbler"
        self.always = always

    def act(self, batch):
        good = self.inner.act(batch)
        return [
            Decision(Invalid("no prefix"), text="just words")
            if self.always or obs.attempt == 0
            else d
            for obs, d in zip(batch, good, strict=True)
        ]


def chats_with(monkeypatch, always: bool):
    import stratagem.agents.spec as spec_module

    real = spec_module.make_agent
    monkeypatch.setattr(
        spec_module,
        "make_agent",
        lambda spec, game, options=None: (
            Fumbler(game, always) if spec == "strategy:Fumbler" else real(spec, game, options)
        ),
    )
    return list(simulated_chats("dond", ["Fumbler", "FairSplit"], 2, seed=3))


def test_refused_answers_are_marked_and_retries_are_not(monkeypatch):
    chats = [c for c in chats_with(monkeypatch, always=False) if c.strategy == "Fumbler"]
    assert chats
    for chat in chats:
        answers = [m for m in chat.messages if m["role"] == "assistant"]
        refused = [m for m in answers if m.get("refused")]
        assert refused and all(m["content"] == "just words" for m in refused)
        assert all(m["content"] != "just words" for m in answers if not m.get("refused"))
        assert not chat.row().get("aborted")


def test_an_aborted_game_is_marked_on_its_row(monkeypatch):
    chats = chats_with(monkeypatch, always=True)
    assert chats and all(c.row()["aborted"] is True for c in chats)
    fumbler = [c for c in chats if c.strategy == "Fumbler"]
    assert all(m.get("refused") for c in fumbler for m in c.messages if m["role"] == "assistant")
