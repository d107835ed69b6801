"""The backend contract: batched chat generation and constrained action distributions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": str}
Chat = Sequence[Message]
StopCheck = Callable[[str], bool]  # on the text generated so far: True once the answer is done
FinishReason = Literal["stop", "length", "action", "error", "empty", "truncated"]


@dataclass(frozen=True)
class Sampling:
    """Generation parameters. ``temperature == 0`` is greedy decoding."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 64

    @property
    def greedy(self) -> bool:
        """Whether decoding is greedy (``temperature <= 0``)."""
        return self.temperature <= 0


@dataclass(frozen=True)
class Generation:
    """One completion: its text, token counts, why it stopped, and backend facts."""

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
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
    ) -> list[Generation]:
        """Returns one completion per chat, in order.

        ``seeds`` (one per chat) make sampled text a function of (chat, seed) only, whatever else
        shares the batch. ``stop`` (one per chat, or None) are checks on the text so far: a
        backend that can stop mid-generation ends that sequence as soon as its check is True
        (an action on the last line, SPEC §4.1; a closed code block) with finish reason
        ``action``; others may ignore them.
        """
        ...

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns, for each chat, the distribution over its choices at the start of the assistant's
        answer, with every other continuation masked out (SPEC §4.3).
        """
        ...


@runtime_checkable
class ToolCallingBackend(Protocol):
    """A backend whose endpoint takes native tool schemas: ``generate(..., tools=[...])``
    returns the calls in ``Generation.info["tool_calls"]``."""

    supports_tools: bool
