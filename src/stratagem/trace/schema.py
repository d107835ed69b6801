"""The trace-line schema for validation at the IO boundary (RELIABILITY E1).

``trace.Trace`` is what the code passes around; this pydantic mirror checks lines read back from
disk, refusing unknown fields and wrong types.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoundLine(_Strict):
    """One round of a trace line, as ``RoundResult`` stores it (NaN payoffs read back as null)."""

    round: int
    moves: list[tuple[int, str]]
    payoffs: tuple[float | None, float | None]
    info: dict[str, Any]


class DecisionLine(_Strict):
    """One decision of a trace line, as ``DecisionRecord`` stores it."""

    seat: int
    round: int
    action: str
    status: Literal["ok", "fallback", "failed"]
    text: str | None
    prompt: str | None
    probs: dict[str, float | None] | None  # a NaN probability is written as null
    tokens: int
    seconds: float
    info: dict[str, Any] | None
    attempt: int = 0


class TraceLine(_Strict):
    """One trace line (schema v1 or v2), as ``Trace.to_json`` writes it; refuses unknown fields."""

    schema_version: Literal[1, 2]
    episode_id: str
    game: str
    version: int
    seed: int
    agents: tuple[str, str]
    rounds: list[RoundLine]
    decisions: list[DecisionLine]
    scenario: dict[str, Any]
    meta: dict[str, Any]
    status: Literal["complete", "error", "timeout", "limit"]
    error: str | None
    params: dict[str, Any] = {}  # v2
    system: tuple[str | None, str | None] = (None, None)  # v2
