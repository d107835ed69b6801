"""SEPO's rewards and advantages (SPEC §6; seed 000 §3.2-3.4): a step's traces become its
trained groups with per-round rewards shaped by the penalty mode, then ``packing.Turn`` samples
carrying their round's advantage and loss weight. The modes and where they depart from the paper
are described in ``sepo``'s module docstring.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from stratagem.errors import ConfigError
from stratagem.game import SafetyWeights
from stratagem.metrics.sepo import SEPOGame, as_sepo_game
from stratagem.pools import Pools
from stratagem.strategies import get_pools
from stratagem.trace import Trace
from stratagem.training.advantages import (
    group_weight,
    penalty,
    shape_rewards,
    step_advantages,
    subtract_penalty,
)
from stratagem.training.packing import Turn
from stratagem.training.sepo.args import Penalty

# Whether a mode's safety terms depend on the actions of the rollout they train (what gives them
# a gradient): per_rollout's exploit and collusion come from auxiliary episodes independent of
# them (only its externality x_r is the rollout's own); shared's P cancels in the baseline.
PENALTY_FOLLOWS_ACTIONS: dict[str, str] = {
    "own_episodes": "yes",
    "per_rollout": "x only",
    "shared": "no",
}


class RewardSettings(Protocol):
    """The settings SEPO's rewards and advantages read (``SEPOArgs`` has them)."""

    @property
    def penalty(self) -> Penalty:
        """Where the safety terms enter."""
        ...

    @property
    def normalise(self) -> bool:
        """Whether payoffs are scaled by ``3 / reference_payoff``."""
        ...

    @property
    def credit(self) -> Literal["return", "immediate"]:
        """A round's return: reward-to-go or the round's own reward."""
        ...

    @property
    def normalisation(self) -> Literal["round", "episode"]:
        """Advantages per round or per episode."""
        ...

    @property
    def safety(self) -> float:
        """The multiplier of every λ of J in the rewards (0: payoff alone, the control)."""
        ...

    @property
    def control(self) -> Literal["none", "payoff"]:
        """payoff: the exploit and collusive pools' episodes rewarded like the training pool's
        (the λ = 0 control that differs from λ = 1 in the safety term only)."""
        ...

    @property
    def scale(self) -> Literal["step", "group"]:
        """One std pooled over the step, or each group's own."""
        ...

    @property
    def format_penalty(self) -> float:
        """Subtracted from a round's reward per decision of the trained seat that named no
        legal action (settled by the fallback)."""
        ...


@dataclass
class Group:
    """The rollouts of one step against one opponent, and their per-round rewards."""

    pool: str
    opponent: str
    traces: list[Trace]
    rewards: torch.Tensor  # (rollouts, rounds)
    weight: float
    penalties: list[float] = field(default_factory=list)  # P per rollout (shared, per_rollout)


def groups_for(game: str, penalty_mode: str, pools: Pools | None = None) -> list[tuple[str, str]]:
    """(pool, opponent) of every group whose episodes a step trains on (``pools``: the game's
    own unless given)."""
    pools = pools or get_pools(game)
    wanted = ("train", "exploit", "collusive") if penalty_mode == "own_episodes" else ("train",)
    return [(pool, name) for pool in wanted for name in getattr(pools, pool)]


def payoff_scale(game: SEPOGame, normalise: bool) -> float:
    """``3 / reference_payoff`` when normalising (SPEC §3), else 1."""
    return 3.0 / game.reference_payoff if normalise else 1.0


def _per_round(traces: list[Trace], value: Callable[[Any], Any]) -> torch.Tensor:
    """(episodes, rounds) of ``value(round)`` (float64)."""
    return torch.tensor([[float(value(r)) for r in t.rounds] for t in traces], dtype=torch.float64)


def _exploit_advantage(trace: Trace, scale: float) -> float:
    """Mean per-round (opponent payoff − agent payoff) of one episode, scaled."""
    diffs = [scale * (r.payoffs[1] - r.payoffs[0]) for r in trace.rounds]
    return sum(diffs) / max(len(diffs), 1)


def _collusion_rate(trace: Trace, game: SEPOGame) -> float:
    return sum(game.collusive_act(r, 0) for r in trace.rounds) / max(len(trace.rounds), 1)


def _externality(trace: Trace, game: SEPOGame) -> float:
    return sum(game.externality(r) for r in trace.rounds) / max(len(trace.rounds), 1)


def scaled(weights: SafetyWeights, factor: float) -> SafetyWeights:
    """``weights`` with every λ multiplied by ``factor`` (1: as the game declares them)."""
    if factor == 1.0:
        return weights
    return SafetyWeights(
        weights.exploit * factor, weights.collusion * factor, weights.externality * factor
    )


def step_groups(
    traces: list[Trace], game: Any, args: RewardSettings, pools: Pools | None = None
) -> list[Group]:
    """The trained groups of a step with their per-round rewards, shaped by the penalty mode
    (``pools``: the game's own unless given).

    ``own_episodes`` rewards each pool's episodes with the term of J it measures
    (``advantages.shape_rewards``); under ``control="payoff"`` (λ = 0) every pool's episodes
    are rewarded as the training pool's, ``u − 0·x = u``, so the groups, their weights and the
    pooled σ are those of the λ = 1 run and only the exploit and collusive terms differ."""
    game = as_sepo_game(game)
    s = payoff_scale(game, args.normalise)
    weights = scaled(game.safety.for_phase("train"), args.safety)
    pools = pools or get_pools(game.name)
    complete = [t for t in traces if t.status == "complete"]
    trained: dict[str, list[Trace]] = defaultdict(list)
    aux: dict[str, list[Trace]] = defaultdict(list)
    for t in complete:
        if "aux_of" in t.meta:
            aux[t.meta["aux_of"]].append(t)
        else:
            trained[t.meta["opponent"]].append(t)
    groups = []
    for pool, name in groups_for(game.name, args.penalty, pools):
        group = sorted(trained.get(name, []), key=lambda t: t.meta["rollout"])
        if not group:
            continue  # every rollout of this group failed: it has nothing to train on
        own = s * _per_round(group, lambda r: r.payoffs[0])
        weight = group_weight(len(getattr(pools, pool)))
        if args.penalty == "own_episodes":
            opponent = s * _per_round(group, lambda r: r.payoffs[1])
            greedy = _per_round(group, lambda r: game.collusive_act(r, 0))
            external = _per_round(group, game.externality)
            shaped = "train" if args.control == "payoff" else pool
            rewards = shape_rewards(own, opponent, greedy, external, shaped, weights)
            groups.append(Group(pool, name, group, rewards, weight))
        else:
            ps = _penalties(args.penalty, group, aux.get(name, []), game, s, args.safety)
            rewards = subtract_penalty(own, torch.tensor(ps, dtype=own.dtype))
            groups.append(Group(pool, name, group, rewards, weight, ps))
    if args.format_penalty:
        for g in groups:
            unparsed = fallback_counts(g.traces, game.rounds).to(g.rewards.dtype)
            g.rewards = g.rewards - args.format_penalty * unparsed
    return groups


def fallback_counts(traces: list[Trace], rounds: int) -> torch.Tensor:
    """(rollouts, rounds): the trained seat's decisions per round that the fallback settled
    (the answer named no legal action)."""
    counts = torch.zeros(len(traces), rounds, dtype=torch.float64)
    for r, t in enumerate(traces):
        for d in t.decisions:
            if d.seat == 0 and d.status == "fallback":
                counts[r, d.round] += 1
    return counts


def _penalties(
    mode: str, group: list[Trace], aux: list[Trace], game: SEPOGame, scale: float, safety: float
) -> list[float]:
    """P per rollout of a train group. ``shared``: one P from the group's auxiliary episodes
    and its mean externality; ``per_rollout``: each rollout's own auxiliary episodes and its
    own externality."""
    weights = scaled(game.safety.for_phase("train"), safety)

    def p(exploit: list[Trace], collusive: list[Trace], external: list[Trace]) -> float:
        return penalty(
            [_exploit_advantage(t, scale) for t in exploit],
            _mean([_collusion_rate(t, game) for t in collusive]),
            _mean([_externality(t, game) for t in external]),
            weights,
        )

    def split(episodes: list[Trace]) -> tuple[list[Trace], list[Trace]]:
        exploit = [t for t in episodes if t.meta["pool"] == "exploit"]
        return exploit, [t for t in episodes if t.meta["pool"] == "collusive"]

    if mode == "shared":
        return [p(*split(aux), group)] * len(group)
    out = []
    for t in group:
        mine = [a for a in aux if a.meta["rollout"] == t.meta["rollout"]]
        out.append(p(*split(mine), [t]))
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def turns_from(groups: list[Group], game: Any, args: RewardSettings) -> list[Turn]:
    """Every generated decision of the agent in the trained groups, with its round's advantage
    and its loss weight."""
    advantages = step_advantages(
        [g.rewards for g in groups],
        credit=args.credit,
        normalisation=args.normalisation,
        scale=args.scale,
    )
    turns = []
    for g, adv in zip(groups, advantages, strict=True):
        weight = g.weight / (len(g.traces) * game.rounds)
        for r, t in enumerate(g.traces):
            for d in t.decisions:
                info = d.info or {}
                ids = info.get("token_ids")
                if d.seat != 0 or not ids:
                    continue
                old = info.get("token_logprobs")
                if old is None or len(old) != len(ids):
                    raise ConfigError("SEPO rollouts must sample (temperature > 0) to train")
                advantage = float(adv[r, d.round])
                turns.append(Turn(t.episode_id, info["prompt_ids"], ids, old, advantage, weight))
    return turns
