"""A scripted backend for tests: replies come from a list or a function; it records every call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stratagem.backends.base import Chat, Generation, Sampling


class ScriptExhausted(RuntimeError):
    """The script has no reply left: the test asked for more model calls than it planned."""


class ScriptedBackend:
    """Replies with ``script`` in order (or ``script(chat)``); ``probs`` answers choice_probs.

    ``calls`` records the batch size of every ``generate`` call, so tests can assert batching.
    """

    def __init__(
        self,
        script: Sequence[str] | Callable[[Chat], str],
        probs: Callable[[Chat, tuple[str, ...]], dict[str, float]] | None = None,
        model_id: str = "scripted",
    ):
        self.script = script if callable(script) else list(script)
        self.probs = probs
        self.model_id = model_id
        self.calls: list[int] = []
        self.prob_calls: list[int] = []
        self.stops: list[list | None] = []  # the stop checks of every generate call
        self._next = 0

    def generate(self, chats: Sequence[Chat], sampling: Sampling, *, seeds=None, stop=None):
        """Returns the next scripted replies (``stop`` checks are recorded, not applied)."""
        self.calls.append(len(chats))
        self.stops.append(list(stop) if stop is not None else None)
        out = []
        for chat in chats:
            if callable(self.script):
                text = self.script(chat)
            else:
                if self._next >= len(self.script):
                    raise ScriptExhausted(f"script of {len(self.script)} replies ran out")
                text = self.script[self._next]
                self._next += 1
            out.append(Generation(text=text, tokens=len(text.split())))
        return out

    def choice_probs(self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]):
        """Returns ``probs(chat, choices)`` per chat, or uniform distributions."""
        self.prob_calls.append(len(chats))
        if self.probs is None:
            return [{c: 1 / len(cs) for c in cs} for cs in choices]
        return [self.probs(chat, cs) for chat, cs in zip(chats, choices, strict=True)]
