"""Token-level chat continuation for a trainer's backend (hf and vllm alike).

A trainer reads each episode as one token sequence, so a seat's next prompt must continue from
the exact ids its earlier prompt was given and its answer sampled, not from a re-tokenization of
their text (which may split differently). ``Chains`` remembers those ids by the chat's text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from stratagem.backends.base import Chat


class Chains:
    """The exact token ids of chats a trainer's backend answered, keyed by their text, so the
    next turn of the same chat continues from those ids (bounded, least recently used first).

    Naive equivalent: tokenize the whole rendered chat again at every turn; that re-reads the
    sampled answers as text, whose tokenization may differ from the sampled ids.
    """

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._ids: OrderedDict[str, list[int]] = OrderedDict()

    def add(self, prompt: str, answer: str, ids: list[int]) -> None:
        """Remember that the rendered chat ``prompt`` answered with ``answer`` is ``ids``."""
        key = prompt + answer
        self._ids[key] = ids
        self._ids.move_to_end(key)
        while len(self._ids) > self.max_entries:
            self._ids.popitem(last=False)

    def continued(
        self, chat: Chat, prompt: str, render: Callable[[Chat], str]
    ) -> tuple[list[int], str] | None:
        """(ids, text) of the longest answered prefix of ``chat`` whose rendering ``prompt``
        continues, or None."""
        for i in range(len(chat) - 1, 0, -1):
            if chat[i].get("role") != "assistant":
                continue
            text = render(chat[:i]) + chat[i]["content"]
            ids = self._ids.get(text)
            if ids is not None and prompt.startswith(text):
                self._ids.move_to_end(text)
                return list(ids), text
            return None  # only the seat's last answer can have been answered by this backend
        return None

    def clear(self) -> None:
        """Forgets every chat."""
        self._ids.clear()
