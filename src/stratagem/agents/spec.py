"""Agent specs on the command line: `strategy:NAME`, and with LLM backends `hf:` and `openai:`."""

from __future__ import annotations

from stratagem.agent import Agent
from stratagem.errors import ConfigError, UnknownNameError
from stratagem.strategies import get_strategy

KINDS = ("strategy",)


def make_agent(spec: str, game: str) -> Agent:
    """Build the agent ``spec`` names for ``game``."""
    kind, sep, arg = spec.partition(":")
    if kind not in KINDS:
        raise UnknownNameError("agent kind", kind, KINDS)
    if not sep or not arg:
        raise ConfigError(f"agent {spec!r} needs a name after '{kind}:', e.g. strategy:TitForTat")
    return get_strategy(game, arg)
