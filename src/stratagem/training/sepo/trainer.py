"""SEPO-GRPO: safety-regularised group-relative policy optimisation (SPEC §6; seed 000 §3.2-3.5,
Alg. 1, Table 17). SEPO's rollouts, rewards and evaluation, plugged into the one GRPO loop
(``grpo.train_grpo``); the rewards live in ``rewards.py``, the update in ``update.py``, the
maths in ``advantages.py``, ``losses.py`` and ``logprobs.py``.

Each step:

1. Rollouts. For every opponent whose episodes are trained on, play ``rollouts`` episodes that
   share the episode seed (same cards, same values) and differ only in the policy's sampling
   (temperature 0.8). The sampler records each generated token's log-probability: the *old*
   policy of the PPO ratio. ``shared`` and ``per_rollout`` also play auxiliary episodes against
   the exploit and collusive pools, which only estimate their penalty.
2. Rewards, per round, on normalised payoffs (``× 3 / reference_payoff``) when ``normalise``:
   ``own_episodes`` (default) rewards each pool's episodes with the term of J they measure
   (train: ``u − λx·x``; exploit: ``−λe·(payoff_o − payoff_agent)``; collusive: ``−λc·[greedy]``);
   ``per_rollout`` (Eq. 3) subtracts from every round of rollout r the penalty ``P_r = λe·e_r +
   λc·c_r + λx·x_r`` of its own auxiliary episodes; ``shared`` (Alg. 1 as printed) subtracts one P
   per group, which cancels in the baseline: exactly zero gradient, kept as the ablation.
3. Advantages per round: each group's baseline is its per-round mean; one std pooled over the
   whole step scales them all (``advantages.step_advantages``), so λ keeps its meaning.
   Groups weigh as J weighs their opponents (1 / |pool| each).
4. Loss: the PPO clipped surrogate (ε 0.2) on the ratio to the old policy — the first
   epoch's own log-probs, detached, so its ratio is exactly 1 whatever the dtype and dropout
   (``update``; the rollout-time log-probs are only compared with them) — plus β · one-sided KL
   against the same model with its LoRA adapter disabled, both at the sampling temperature;
   every generated token of decision t carries its round's advantage. ``epochs`` optimiser
   steps per batch of rollouts (one backward each, accumulated over sequences), with gradient
   clipping.
5. At step 0 (the starting policy) and every ``checkpoint_every`` steps: an atomic checkpoint
   and the full SEPO evaluation on the same payoff scale; the best checkpoint by Safety J is
   recorded in ``best.json`` (not the last — seed 000 §8) and survives ``save_total_limit``.

Where this departs from the paper, on purpose:
- the default penalty is ``own_episodes`` (the policy gradient of J); the paper's Eq. 3 and
  Alg. 1 are the ``per_rollout`` and ``shared`` ablations;
- one std pooled over the step instead of each group's (``scale="step"``): a group's own std
  would cancel the λ of a group whose rewards carry a single term (``scale="group"`` keeps it);
- credit is the reward-to-go by default (``credit="immediate"`` is the paper's literal form,
  which makes defecting look best against TitForTat);
- ``per_rollout`` draws one exploit and one collusive opponent per rollout (the paper's
  "freshly sampled opponent"), and its x_r is the rollout's own externality. Built as Eq. 3
  reads, but its e_r and c_r come from auxiliary episodes that do not depend on the rollout's
  own actions: the penalty is noise on the rollout's advantage, with zero expected gradient
  (measured −0.003 ± 0.069 per exploit group, against −21.2 ± 1.5 for ``own_episodes``' exploit
  groups). Only ``own_episodes`` trains on the exploit and collusion terms;
- each decision's token losses are averaged over its tokens, then weighted by
  ``group weight / (rollouts × rounds)``, so long answers do not outweigh short ones;
- decisions settled by the constrained fallback still train the tokens the model generated,
  with the advantage of the action that was played; ``--format-penalty X`` subtracts X from the
  round's reward per such decision, so a small model whose answers mostly fail to parse is not
  trained towards whatever text happened to precede a good fallback action;
- the KL reference stays the starting policy unless ``--ref-refresh-every 5 --ref-refresh-kl
  0.5`` asks for Table 17's refresh; gradient checkpointing is off unless
  ``--gradient-checkpointing``;
- the reference is the policy's own weights with the adapter disabled, in the policy's dtype:
  Table 17's 4-bit quantised reference is not built;
- an addition, off by default: ``--exploit-best-response`` (Kuhn) adds the exact best response
  to the current policy to the exploit pool (``best_responder.py``, beside this module), since
  fixed exploiters stop penalising a policy that beats them long before it stops being exploitable.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from stratagem.agent import Agent
from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Sampling
from stratagem.backends.hf import HFBackend
from stratagem.game import Game
from stratagem.games import get_game
from stratagem.metrics.actions import action_rates
from stratagem.play import EpisodeSpec, play
from stratagem.pools import Pools
from stratagem.seeding import derive
from stratagem.strategies import get_pools
from stratagem.trace import Trace
from stratagem.training import engines
from stratagem.training.checkpoints import TrainerState
from stratagem.training.grpo import Log, StepRollouts, train_grpo
from stratagem.training.rollouts import group_game
from stratagem.training.rollouts import opponent as opponent_agent
from stratagem.training.sepo.args import ARM_MEANING, SEPOArgs
from stratagem.training.sepo.best_responder import (
    BEST_RESPONSE,
    best_response_to,
    with_best_response,
)
from stratagem.training.sepo.report import actions_by_opponent, plot_actions, plot_curve
from stratagem.training.sepo.rewards import groups_for, step_groups, turns_from

if TYPE_CHECKING:
    from stratagem.training.engines import RolloutBackend


def rollout_specs(
    agent: Agent,
    game: Game,
    args: SEPOArgs,
    step: int,
    pools: Pools | None = None,
    opponents: Mapping[str, Agent] | None = None,
) -> list[EpisodeSpec]:
    """The step's episodes, ``agent`` in seat 0: n per trained group (one seed per group, rollout
    r as the scenario of a ``RolloutGame``), plus the auxiliary episodes of ``shared`` (per
    group, one per exploit and collusive opponent) and ``per_rollout`` (per rollout, one freshly
    drawn exploit and one collusive opponent). ``pools``: the game's own unless given;
    ``opponents``: agents for pool members that are not registered strategies."""
    pools = pools or get_pools(game.name)
    specs = []

    def spec(episode_id: str, seed: int, opponent: str, meta: dict, rollout=None) -> EpisodeSpec:
        other = (opponents or {}).get(opponent) or opponent_agent(game.name, opponent)
        agents = (agent, other)
        return EpisodeSpec(episode_id, seed, agents, {"seat": 0, **meta}, scenario=rollout)

    for pool, name in groups_for(game.name, args.penalty, pools):
        seed = derive(args.seed, "sepo", step, name)
        for r in range(args.rollouts):
            meta = {"pool": pool, "opponent": name, "rollout": r}
            specs.append(spec(f"{step}/{name}/{r}", seed, name, meta, rollout=r))
            if args.penalty == "per_rollout":
                rng = random.Random(derive(args.seed, "sepo-aux", step, name, r))
                for aux_pool in ("exploit", "collusive"):
                    members = getattr(pools, aux_pool)
                    if members:
                        other = rng.choice(members)
                        meta = {"pool": aux_pool, "opponent": other, "aux_of": name, "rollout": r}
                        aux_seed = derive(args.seed, "sepo-aux", step, name, r, aux_pool)
                        specs.append(spec(f"{step}/{name}/{r}/{other}", aux_seed, other, meta))
        if args.penalty == "shared":
            for aux_pool in ("exploit", "collusive"):
                for other in getattr(pools, aux_pool):
                    meta = {"pool": aux_pool, "opponent": other, "aux_of": name}
                    aux_seed = derive(args.seed, "sepo-aux", step, name, other)
                    specs.append(spec(f"{step}/{name}/aux/{other}", aux_seed, other, meta))
    return specs


def rollout_agent(policy: Any, tokenizer: Any, game: Game, args: SEPOArgs) -> LLMAgent:
    """The agent that plays the rollouts, sampling at ``args.temperature`` on
    ``rollout_backend``."""
    sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
    return LLMAgent(rollout_backend(policy, tokenizer, args), game, sampling, fallback="sample")


def rollout_backend(policy: Any, tokenizer: Any, args: SEPOArgs) -> RolloutBackend:
    """The backend of the rollouts (``engines.rollout_backend``: hf, vllm or llamacpp)."""
    return engines.rollout_backend(policy, tokenizer, args, f"sepo:{args.model}")


def rollout(
    agent: LLMAgent,
    args: SEPOArgs,
    step: int,
    pools: Pools | None = None,
    opponents: Mapping[str, Agent] | None = None,
) -> list[Trace]:
    """Plays the step's episodes together (one batched generation per tick); rollouts of a
    group share their episode seed and differ only in the agent's sampling."""
    specs = rollout_specs(agent, agent.game, args, step, pools, opponents)
    return list(play(group_game(agent.game), specs, max_live=len(specs)))


# ---- the loop ----


class SEPOTask:
    """SEPO's rollouts, rewards and evaluation, as ``grpo.train_grpo`` runs them."""

    metric = "safety_j"

    def __init__(self, args: SEPOArgs):
        """Train on ``args`` (checked and resolved)."""
        self.args = args
        self.game = get_game(args.game)
        self.evaluates = bool(args.eval_episodes)
        self.agent: LLMAgent | None = None
        self.backend: RolloutBackend | None = None
        pools = get_pools(self.game.name)
        self.pools = with_best_response(pools) if args.exploit_best_response else pools

    def start(self, policy: Any, tokenizer: Any) -> None:
        """Builds the rollout agent on the policy."""
        args = self.args
        self.backend = rollout_backend(policy, tokenizer, args)
        sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
        self.agent = LLMAgent(self.backend, self.game, sampling, fallback="sample")

    def rollouts(self, step: int) -> StepRollouts:
        """The step's rollouts, their groups' shaped rewards and the turns they train."""
        assert self.agent is not None and self.backend is not None, "start() builds the agent"
        self.backend.reset_prefix_cache()  # the weights changed: no stale KV
        opponents: dict[str, Agent] = {}
        gain = None
        if self.args.exploit_best_response:  # the best response to the policy as it is now
            responder, gain = best_response_to(self.agent, self.game)
            opponents[BEST_RESPONSE] = cast(Agent, responder)  # a Strategy's name is read-only
        traces = rollout(self.agent, self.args, step, self.pools, opponents)
        groups = step_groups(traces, self.game, self.args, self.pools)
        summary = {
            "reward": _mean([float(g.rewards.sum(-1).mean()) for g in groups]),
            "penalty": _mean([p for g in groups for p in g.penalties]),
        }
        if gain is not None:
            summary["exploitability"] = gain  # of the policy that played this step
        return StepRollouts(turns_from(groups, self.game, self.args), summary)

    def evaluate(self, policy: Any, tokenizer: Any, step: int) -> dict[str, Any]:
        """The full SEPO evaluation of checkpoint ``step``."""
        return evaluate_checkpoint(policy, tokenizer, self.game, self.args, step)

    def headline(self, row: dict[str, Any]) -> dict[str, Any]:
        """Safety J and its terms, Kuhn's exact exploitability."""
        return _headline(row)

    def report(self, state: TrainerState) -> None:
        """Redraws ``curve.png``."""
        plot_curve(self.args.out, state, arm=self.args.arm())
        plot_actions(self.args.out, state)


def train_sepo(args: SEPOArgs, log: Log = print) -> Path:
    """Run (or resume) SEPO training; returns the output folder."""
    args.check()
    args = args.resolved()
    log(f"SEPO arm {args.arm()}: {ARM_MEANING.get(args.arm(), f'λ × {args.safety:g}')}")
    return train_grpo(args, SEPOTask(args), torch_seed="sepo-torch", log=log)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def evaluate_checkpoint(policy, tokenizer, game, args: SEPOArgs, step: int) -> dict:
    """The full SEPO evaluation of the current policy (greedy), on the training payoff scale,
    plus exact Kuhn exploitability."""
    from stratagem.evaluation.pools import evaluate

    policy.eval()
    backend = HFBackend.from_model(
        policy, tokenizer, model_id=f"sepo:{args.model}@{step}", prefix_reuse=True
    )
    agent = LLMAgent(backend, game, Sampling(0.0, 1.0, args.max_new_tokens))
    result = evaluate(
        game, agent, episodes=args.eval_episodes, seed=args.seed + 1, normalise=args.normalise
    )
    row = {
        "step": step,
        **{k: {"value": e.value, "stderr": e.stderr, "n": e.n} for k, e in result.metrics.items()},
    }
    if result.exact_exploitability is not None:
        row["exact_exploitability"] = result.exact_exploitability
    row["actions"] = actions_by_opponent(action_rates(result.traces))
    return row


def _headline(row: dict) -> dict:
    keys = ("safety_j", "pay", "exploit", "collusion", "fallback_rate", "exact_exploitability")
    return {k: row[k]["value"] if isinstance(row[k], dict) else row[k] for k in keys if k in row}
