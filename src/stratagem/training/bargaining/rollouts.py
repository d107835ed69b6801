"""Bargaining GRPO's rollouts and reward (SPEC §8; seed 004 Eq. 8, Table 8, App. B.4): the agent
guard that quits for the model when its context would overflow, the wrapper that plays rollout r
of a group in either role, and the reward of a finished negotiation. The reward's terms and
where they depart from the paper are described in the trainer's module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from stratagem.agent import Decision
from stratagem.agents.llm import LLMAgent
from stratagem.errors import GameError
from stratagem.game import Game, Observation, Seat, chat_for
from stratagem.games.bargaining import SELLER, Call, Turn
from stratagem.metrics.bargaining import consistency_checks
from stratagem.trace import Trace
from stratagem.training.rollouts import RolloutState

IR_PENALTY = 1.0  # subtracted for a deal with negative own utility (with ir_penalty)
WALK_AWAY_CREDIT = 1.0  # added for an NGFT scenario that ends without a deal (with ir_penalty)
QUIT = Turn((Call("quit_negotiation"),), "the conversation no longer fits in my context")


@dataclass(frozen=True)
class Reward:
    """The terms of one rollout's reward for the trained seat (see the module docstring)."""

    format: float
    execution: float
    consistency: float
    surplus: float
    ir: float = 0.0  # −IR_PENALTY, +WALK_AWAY_CREDIT or 0 (always 0 without ir_penalty)
    overflow: bool = False

    @property
    def total(self) -> float:
        """The rollout's reward: the sum of the terms, or 0 after a context overflow."""
        if self.overflow:
            return 0.0
        return self.format + self.execution + self.consistency + self.surplus + self.ir


def overflowed(trace: Trace, seat: Seat) -> bool:
    """Whether ``seat``'s context overflowed (``ContextLimit`` ended the episode)."""
    return any(d.seat == seat and (d.info or {}).get("overflow") for d in trace.decisions)


def reward(trace: Trace, seat: Seat, *, ir_penalty: bool = False) -> Reward:
    """Returns the reward terms of ``seat`` in a complete bargaining trace.

    Raises:
        GameError: the trace is not a finished negotiation whose moves match its decisions.
    """
    if trace.status != "complete" or len(trace.rounds) != 1:
        raise GameError(f"no reward for {trace.episode_id}: not a finished negotiation")
    result = trace.rounds[0]
    info, sc = result.info, trace.scenario
    mine = [d for d in trace.decisions if d.seat == seat]
    moves = [move for who, move in result.moves if who == seat]  # one per decision, in order
    if len(moves) != len(mine):
        raise GameError(f"{trace.episode_id}: {len(mine)} decisions but {len(moves)} moves")
    answers = [
        (d, move) for d, move in zip(mine, moves, strict=True) if not (d.info or {}).get("overflow")
    ]
    parsed = [move for d, move in answers if d.status == "ok"]
    executed = [move for move in parsed if not move.startswith("invalid:")]
    accept_ok, offers_ok = consistency_checks(info["events"])[seat]
    v_s, v_b = sc["seller_value"], sc["buyer_value"]
    deal, price = bool(info["deal"]), info["price"]
    own = (price - v_s if seat == SELLER else v_b - price) if deal else 0.0
    surplus = min(max(own / (v_b - v_s), 0.0), 1.0) if deal and sc["regime"] == "GFT" else 0.0
    ir = 0.0
    if ir_penalty and deal and own < 0:
        ir = -IR_PENALTY
    elif ir_penalty and not deal and sc["regime"] == "NGFT":
        ir = WALK_AWAY_CREDIT
    return Reward(
        format=len(parsed) / len(answers) if answers else 0.0,
        execution=len(executed) / len(parsed) if parsed else 0.0,
        consistency=(accept_ok + offers_ok) / 2,
        surplus=surplus,
        ir=ir,
        overflow=overflowed(trace, seat),
    )


class ContextLimit:
    """An LLM agent that quits for the model when a prompt would overflow its context.

    A decision whose prompt (the chat template rendered with the generation prompt) plus
    ``max_new_tokens`` exceeds ``max_context`` tokens is answered with ``quit_negotiation()``
    without generating: status ``fallback``, ``info = {"overflow": True, "prompt_tokens": n}``.
    The others go to ``agent`` in one batch.
    """

    def __init__(self, agent: LLMAgent, tokenizer: Any, max_context: int, max_new_tokens: int):
        """Guard ``agent``; ``tokenizer`` renders and counts its prompts."""
        self.agent = agent
        self.name = agent.name
        self.tokenizer = tokenizer
        self.max_context = max_context
        self.max_new_tokens = max_new_tokens

    def prompt_tokens(self, obs: Observation) -> int:
        """Returns the tokens of the prompt the model would answer at ``obs``."""
        text = self.tokenizer.apply_chat_template(
            chat_for(obs), tokenize=False, add_generation_prompt=True
        )
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def act(self, batch: list[Observation]) -> list[Decision]:
        """Returns one decision per observation: the model's, or a quit where it would overflow."""
        sizes = [self.prompt_tokens(obs) for obs in batch]
        fits = [i for i, n in enumerate(sizes) if n + self.max_new_tokens <= self.max_context]
        out: list[Decision] = [
            Decision(QUIT, status="fallback", info={"overflow": True, "prompt_tokens": n})
            for n in sizes
        ]
        if fits:
            for i, d in zip(fits, self.agent.act([batch[i] for i in fits]), strict=True):
                out[i] = d
        return out


class RoleRollouts:
    """``game``, where ``from_scenario((r, seat), seed)`` plays rollout r of the group of
    ``seed`` with the trained agent in ``seat`` (``rollouts.RolloutGame`` for either seat)."""

    def __init__(self, game: Game):
        """Wrap ``game``."""
        self._game = game

    def from_scenario(self, scenario: tuple[int, int], seed: int) -> RolloutState:
        """Rollout r of the group of ``seed``, its trained seat's decision seeds salted by r."""
        r, seat = scenario
        return RolloutState(self._game.new_episode(seed), int(r), int(seat))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._game, name)


def role_game(game: Game) -> Game:
    """``RoleRollouts(game)``, typed as the game it forwards every member to (``Game``'s class
    variables cannot be declared by a wrapper of any game)."""
    return cast(Game, RoleRollouts(game))
