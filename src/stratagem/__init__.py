"""stratagem: language-model agents in strategic games.

The public API, a few imports away from everything the CLI does::

    from stratagem import evaluate, get_game, get_strategy, play
    result = evaluate(get_game("ipd"), get_strategy("ipd", "TitForTat"))

Names load on first use (PEP 562), so ``import stratagem`` stays light: heavy libraries (torch,
transformers, openai, pandas) load only when a backend, a trainer or a report needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "Agent": "stratagem.agent",
    "Decision": "stratagem.agent",
    "Strategy": "stratagem.agent",
    "Episode": "stratagem.episode",
    "EpisodeSpec": "stratagem.episode",
    "Evaluation": "stratagem.evaluation.pools",
    "evaluate": "stratagem.evaluation.pools",
    "Game": "stratagem.game",
    "Invalid": "stratagem.game",
    "Message": "stratagem.game",
    "Observation": "stratagem.game",
    "RoundResult": "stratagem.game",
    "State": "stratagem.game",
    "chat_for": "stratagem.game",
    "GameSpec": "stratagem.games",
    "get_game": "stratagem.games",
    "exact_exploitability": "stratagem.metrics.kuhn",
    "sepo_metrics": "stratagem.metrics.sepo",
    "play": "stratagem.play",
    "play_one": "stratagem.play",
    "get_pools": "stratagem.strategies",
    "get_strategy": "stratagem.strategies",
    "payoff_matrix": "stratagem.tournament",
    "round_robin": "stratagem.tournament",
    "Trace": "stratagem.trace",
    "read_traces": "stratagem.trace",
}
__all__ = [
    "Agent",
    "Decision",
    "Episode",
    "EpisodeSpec",
    "Evaluation",
    "Game",
    "GameSpec",
    "Invalid",
    "Message",
    "Observation",
    "RoundResult",
    "State",
    "Strategy",
    "Trace",
    "chat_for",
    "evaluate",
    "exact_exploitability",
    "get_game",
    "get_pools",
    "get_strategy",
    "payoff_matrix",
    "play",
    "play_one",
    "read_traces",
    "round_robin",
    "sepo_metrics",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stratagem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from stratagem.agent import Agent, Decision, Strategy
    from stratagem.episode import Episode, EpisodeSpec
    from stratagem.evaluation.pools import Evaluation, evaluate
    from stratagem.game import Game, Invalid, Message, Observation, RoundResult, State, chat_for
    from stratagem.games import GameSpec, get_game
    from stratagem.metrics.kuhn import exact_exploitability
    from stratagem.metrics.sepo import sepo_metrics
    from stratagem.play import play, play_one
    from stratagem.strategies import get_pools, get_strategy
    from stratagem.tournament import payoff_matrix, round_robin
    from stratagem.trace import Trace, read_traces
