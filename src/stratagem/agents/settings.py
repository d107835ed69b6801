"""The settings of a language-model agent, as a settings dataclass (see ``stratagem.settings``):
how it is loaded and how it samples, shared by every command that builds one."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import Field

from stratagem.settings import NonNegative, Positive, opt

DECISION_TOKENS = 64  # a game's token budget per decision unless it declares max_new_tokens


def decision_tokens(game: Any) -> int:
    """Returns the generated-token budget per decision of ``game``: its ``max_new_tokens``
    class attribute (games whose turns are messages declare a larger one), else 64."""
    return int(getattr(game, "max_new_tokens", DECISION_TOKENS))


@dataclasses.dataclass(kw_only=True)
class LLMSettings:
    """How a language-model agent is loaded and samples (ignored by rule-based agents)."""

    temperature: Annotated[float, Field(ge=0)] | None = None
    """Sampling temperature [the game's: 0 (greedy) for agents in text games; 0.8 for
    dialogue trees, whose LLM seeds are chance outcomes]."""
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    """Nucleus sampling mass [1 for text games; 0.95 for dialogue trees]."""
    max_new_tokens: Positive | None = None
    """Generated tokens per decision [the game's own budget: 64 for token games, 256 where a
    turn is a message]."""
    adapter: str | None = None
    """PEFT adapter folder(s) for an hf or vllm model (comma-separated: stacked in order)."""
    dtype: str = "auto"
    """Weights dtype of a local model: auto, bfloat16, float16 or float32."""
    fallback: Literal["argmax", "sample", "none"] = "argmax"
    """What an unparseable answer becomes: the likeliest legal action, a sampled one, or none."""
    base_url: str | None = None
    """OpenAI-compatible endpoint of openai:MODEL agents."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's API key."""
    max_batch: Positive = 64
    """Sequences per local generate call."""
    concurrency: Positive = 8
    """Requests in flight to an OpenAI-compatible endpoint."""
    max_retries: NonNegative = 5
    """Retries per request to an endpoint."""
    attempt_timeout: Annotated[float, Field(gt=0)] = 60.0
    """Seconds per request attempt."""

    def llm_options(self, game: Any = None) -> Any:
        """Returns the ``LLMOptions`` these settings name; ``max_new_tokens`` left unset becomes
        ``game``'s own budget."""
        from stratagem.agents.spec import LLMOptions

        values = {k: getattr(self, k) for k in LLMOptions.__dataclass_fields__}
        defaults = {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": decision_tokens(game)}
        for key, default in defaults.items():
            if values[key] is None:
                values[key] = default
        return LLMOptions(**values)

    def llm_settings_given(self) -> list[str]:
        """Returns the flags of the sampling/model settings that differ from their defaults (a
        rule-based agent refuses them rather than silently ignoring them)."""
        keys = ("temperature", "top_p", "max_new_tokens", "adapter", "base_url", "dtype")
        defaults = {f.name: f.default for f in dataclasses.fields(LLMSettings)}
        return ["--" + k.replace("_", "-") for k in keys if getattr(self, k) != defaults[k]]


@dataclasses.dataclass(kw_only=True)
class AgentSettings(LLMSettings):
    """One agent and, when it is a language model, its settings."""

    agent: str = opt("hf", "-a")
    """strategy:NAME, hf (embedded SmolLM2), hf:MODEL_OR_PATH, openai:MODEL, vllm[:MODEL]."""
