"""The backend contract: batched chat generation and constrained action distributions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": str}
Chat = Sequence[Message]
FinishReason = Literal["stop", "length", "action", "error", "empty"]


@dataclass(frozen=True)
class Sampling:
    """Generation parameters. ``temperature == 0`` is greedy decoding."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 64

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


@dataclass(frozen=True)
class Generation:
    text: str
    tokens: int = 0  # generated tokens
    prompt_tokens: int = 0
    prefill_tokens: int = 0  # prompt tokens actually computed (fewer with prefix reuse)
    finish_reason: FinishReason = "stop"
    seconds: float = 0.0
    info: Mapping[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """A chat model. Every call is batched: one call serves every pending decision."""

    model_id: str  # names the exact weights (fingerprints, agent names)

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        legal: Sequence[tuple[str, ...]] | None = None,
        seeds: Sequence[int] | None = None,
        done: Sequence[Callable[[str], bool]] | None = None,
    ) -> list[Generation]:
        """One completion per chat. With ``legal`` a backend may stop a sequence as soon as its
        last non-empty line holds a legal action (SPEC §4.1); with ``done``, as soon as that
        chat's check accepts the text (free-form answers such as tool calls).
        """
        ...

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """For each chat, the distribution over its choices at the start of the assistant's
        answer, with every other continuation masked out (SPEC §4.3).
        """
        ...
