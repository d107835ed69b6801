"""stratagem: language-model agents in strategic games.

The public API, a few imports away from everything the CLI does::

    from stratagem import evaluate, get_game, get_strategy, play
    result = evaluate(get_game("ipd"), get_strategy("ipd", "TitForTat"))

Heavy libraries (torch, transformers, openai) load only when an LLM backend is built.
"""

from stratagem.agent import Agent, Decision, Strategy
from stratagem.evaluation import Evaluation, evaluate
from stratagem.game import Game, Invalid, Observation, RoundResult, State
from stratagem.games import get_game
from stratagem.metrics.kuhn import exact_exploitability
from stratagem.metrics.sepo import sepo_metrics
from stratagem.play import EpisodeSpec, play, play_one
from stratagem.strategies import get_pools, get_strategy
from stratagem.tournament import payoff_matrix, round_robin
from stratagem.trace import Trace, read_traces

__version__ = "0.1.0"
__all__ = [
    "Agent",
    "Decision",
    "EpisodeSpec",
    "Evaluation",
    "Game",
    "Invalid",
    "Observation",
    "RoundResult",
    "State",
    "Strategy",
    "Trace",
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
