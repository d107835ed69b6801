"""Bargaining GRPO: an LLM learns bilateral trade against a fixed opponent (SPEC §8, Training;
seed 004 §5.3, Eq. 5-8, Table 8, App. B.2-B.4). Its rollouts, rewards and evaluation, plugged
into the one GRPO loop (``grpo.train_grpo``); the reward is the pure functions
``rollouts.reward`` and ``Reward.total``, the evaluation and reports live in
``report``.

Each step:

1. Rollouts. ``scenarios`` scenarios are drawn from the catalog's train split (GFT : NGFT = 2 : 1)
   and each is played in **both roles** against the fixed opponent (default Boulware),
   ``rollouts`` times per role. The rollouts of one (scenario, role) group share the episode seed
   — same item, same reservation values, same opponent — and differ only in the policy's sampling
   (``RolloutState`` salts the trained seat's decision seeds). The sampler records every generated
   token's log-probability: the old policy of the PPO ratio.
2. Reward of a rollout (seed 004 Eq. 8, Table 8): ``R = r_format + r_execution + r_consistency +
   r_surplus``, each in [0, 1], from the trained seat's answers and the trace:

   - ``r_format``: the share of its answers holding a valid tool-call code block — one closed
     ```` ```py ```` block of whitelisted calls with literal arguments, i.e. the game's parser
     (``tools.parse_turn``) accepted it (decision status ``ok``);
   - ``r_execution``: the share of those parsed answers the engine then played as written, not
     refused by the protocol (accepting with no open offer, accepting and offering at once, ...);
     0 when no answer parsed;
   - ``r_consistency``: the mean of the two checks of ``metrics.bargaining.consistency_checks``
     (no acceptance worse for oneself than an offer one refused; no offer worse for the opponent
     than one's own offer it refused): 1, 0.5 or 0;
   - ``r_surplus``: on a GFT deal, one's own utility / (v_b − v_s) clipped to [0, 1] — the
     surplus share of Definition 5, 0 for a deal below one's reservation value, 1 past the
     opponent's; 0 without a deal and on every NGFT deal.

   With ``ir_penalty`` (beyond the paper: the fix its §5.4.4 proposes) ``R`` also gets
   ``−IR_PENALTY = −1`` for a deal with negative own utility (an IR violation, whoever pressed
   accept) and ``+WALK_AWAY_CREDIT = +1`` for an NGFT scenario that ends without a deal (the
   trained seat or the opponent quit, or the round limit passed), so that a rational walk-away
   is worth as much as the whole surplus and an irrational acceptance less than nothing. Off,
   ``R`` is the paper's.
3. Context overflow: when a prompt of the trained seat plus ``max_new_tokens`` would not fit in
   ``max_context`` tokens (default: the model's context), ``ContextLimit`` answers for the model
   with ``quit_negotiation()`` (a ``fallback`` decision with ``info["overflow"]``), which ends the
   episode (on the seller's listing turn, where a quit is refused, after the engine's fallback
   listing). Such a rollout's reward is 0, whatever else it earned, and every one of its tokens
   has loss weight 0: masked, with no synthetic token (App. B.4 attaches PAD-token log-probs
   instead). Its 0 still counts in the group's mean and std, as the paper's zero-reward episode
   keeps its batch slot.
4. Advantages (Eq. 7): ``(R − mean_group R) / (std_group R + 1e-8)`` (``scale="group"``), or one
   std pooled over the step (``scale="step"``, SEPO's); every token of a rollout carries it.
5. Loss: the PPO clipped surrogate (ε 0.2) against the rollout-time log-probabilities plus
   β · one-sided KL against the same model with its LoRA disabled (the SFT policy when
   ``--adapter`` is given), at the sampling temperature. A rollout weighs 1 / (groups ×
   rollouts), split evenly over its answers, and each answer's weight over its tokens. An
   episode's answers are packed into one sequence (the chat is read once).
6. At step 0 (the starting policy) and every ``checkpoint_every`` steps: an atomic checkpoint and
   a **tournament slice** on the validation split — the greedy policy against each evaluation
   opponent in both roles on ``eval_gft`` + ``eval_ngft`` fixed scenarios — reporting per role
   the GFT deal rate, surplus share (valid deals) and self-violation, and the NGFT
   self-violation. The checkpoint score, over both roles, is the mean over GFT negotiations of
   one's surplus share, 0 without a deal valid for both sides: Σ valid shares / N, which is
   surplus share × *valid*-deal rate (Table 7's score counts every deal in its deal rate; a deal
   below a reservation value earns no share here). ``best.json`` names the best checkpoint, which
   rotation keeps; ``stages.md`` is the Base → SFT → RL table (Base is evaluated once when
   training starts from an SFT adapter).

Where this departs from the paper, on purpose:

- every scenario is played in both roles (the paper draws one role per episode), so a group
  never mixes roles;
- each answer's token losses are averaged over its tokens and answers share their rollout's
  weight equally (SEPO's weighting), instead of one mean over all of a rollout's tokens;
- overflow is masked rather than carried by PAD-token log-probabilities;
- a LoRA on the attention projections (the paper fine-tunes 8B fully, 14B with LoRA rank 64);
- defaults follow Table 13 where it is legible (8 rollouts, ε 0.2, β 0.05, temperature 1.0);
  the learning rate is SPEC §6's 1e-5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Sampling
from stratagem.backends.hf import HFBackend
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError
from stratagem.game import Seat
from stratagem.games.bargaining import BUYER, SELLER
from stratagem.metrics.bargaining import ROLES
from stratagem.play import play
from stratagem.seeding import derive
from stratagem.trace import Trace
from stratagem.training.advantages import step_advantages
from stratagem.training.bargaining.args import BargainingArgs, evaluation_game, training_game
from stratagem.training.bargaining.report import (
    BASE_EVAL,
    plot_curve,
    stage_table,
    stages,
    tournament_slice,
    write_json,
)
from stratagem.training.bargaining.rollouts import ContextLimit, Reward, reward, role_game
from stratagem.training.checkpoints import TrainerState
from stratagem.training.engines import rollout_backend
from stratagem.training.grpo import Log, StepRollouts, train_grpo
from stratagem.training.packing import Turn as Sample
from stratagem.training.policy import load_base
from stratagem.training.rollouts import opponent as opponent_agent

if TYPE_CHECKING:
    from stratagem.training.engines import RolloutBackend

POLICY = "policy"  # the trained agent's name in evaluation traces


def rollout_specs(agent: Any, opponent: Any, args: BargainingArgs, step: int) -> list[EpisodeSpec]:
    """The step's episodes: for each scenario k and role, ``rollouts`` episodes sharing the seed
    ``derive(seed, "bargaining-grpo", step, k)`` (the same scenario in both roles)."""
    specs = []
    for k in range(args.scenarios):
        seed = derive(args.seed, "bargaining-grpo", step, k)
        for seat in (SELLER, BUYER):
            agents = (agent, opponent) if seat == SELLER else (opponent, agent)
            for r in range(args.rollouts):
                meta = {"seat": seat, "group": k, "rollout": r}
                episode_id = f"{step}/{k}/{ROLES[seat]}/{r}"
                specs.append(EpisodeSpec(episode_id, seed, agents, meta, scenario=(r, seat)))
    return specs


@dataclass
class Group:
    """The rollouts of one scenario in one role, and their rewards."""

    scenario: int
    seat: Seat
    traces: list[Trace]
    rewards: list[Reward]

    @property
    def totals(self) -> torch.Tensor:
        """Each rollout's reward, (rollouts,)."""
        return torch.tensor([r.total for r in self.rewards], dtype=torch.float64)


def step_groups(traces: list[Trace], args: BargainingArgs) -> list[Group]:
    """The step's (scenario, role) groups in order, rollouts by index; episodes that ended in an
    error (a backend failure) are left out of their group."""
    found: dict[tuple[int, int], list[Trace]] = {}
    for t in traces:
        if t.status == "complete":
            found.setdefault((t.meta["group"], t.meta["seat"]), []).append(t)
    groups = []
    for (k, seat), members in sorted(found.items()):
        members.sort(key=lambda t: t.meta["rollout"])
        rewards = [reward(t, seat, ir_penalty=args.ir_penalty) for t in members]
        groups.append(Group(k, seat, members, rewards))
    return groups


def samples_from(groups: list[Group], args: BargainingArgs) -> list[Sample]:
    """Every generated answer of the trained seat with its rollout's advantage and its loss
    weight: 1 / (groups × rollouts) per rollout (0 after an overflow), split over its answers."""
    advantages = step_advantages(
        [g.totals[:, None] for g in groups], normalisation="episode", scale=args.scale
    )
    samples = []
    for g, adv in zip(groups, advantages, strict=True):
        for r, (t, rew) in enumerate(zip(g.traces, g.rewards, strict=True)):
            answers = [
                d for d in t.decisions if d.seat == g.seat and (d.info or {}).get("token_ids")
            ]
            if not answers:
                continue
            weight = 0.0 if rew.overflow else 1.0 / (len(groups) * len(g.traces) * len(answers))
            for d in answers:
                info = d.info or {}
                old = info.get("token_logprobs")
                if old is None or len(old) != len(info["token_ids"]):
                    raise ConfigError("GRPO rollouts must sample (temperature > 0) to train")
                samples.append(
                    Sample(
                        t.episode_id,
                        info["prompt_ids"],
                        info["token_ids"],
                        old,
                        float(adv[r, 0]),
                        weight,
                    )
                )
    return samples


# ---- checkpoint evaluation: a tournament slice ----


def evaluate_model(model: Any, tokenizer: Any, args: BargainingArgs, label: str) -> dict[str, Any]:
    """The tournament slice of ``model`` answering greedily (an overflow quits, as in training)."""
    model.eval()
    game = evaluation_game(args)
    backend = HFBackend.from_model(model, tokenizer, model_id=label, prefix_reuse=True)
    llm = LLMAgent(backend, game, Sampling(0.0, 1.0, args.max_new_tokens), name=POLICY)
    agent = ContextLimit(llm, tokenizer, context_of(model, args), args.max_new_tokens)
    return tournament_slice(
        game, agent, args.eval_opponents, args.eval_gft, args.eval_ngft, args.seed + 1
    )


def evaluate_checkpoint(
    policy: Any, tokenizer: Any, args: BargainingArgs, step: int
) -> dict[str, Any]:
    """The tournament slice of the current policy, as checkpoint ``step``'s row."""
    row = evaluate_model(policy, tokenizer, args, f"bargaining:{args.model}@{step}")
    return {"step": step, **row}


def evaluate_base(args: BargainingArgs) -> dict[str, Any]:
    """The tournament slice of the base model, without the SFT adapter (the Base stage)."""
    model, tokenizer = load_base(args.model)
    return evaluate_model(model, tokenizer, args, f"bargaining:{args.model}")


def context_of(model: Any, args: BargainingArgs) -> int:
    """``max_context``, or the model's context length."""
    if args.max_context is not None:
        return args.max_context
    config = model.get_base_model().config if hasattr(model, "get_base_model") else model.config
    length = getattr(config, "max_position_embeddings", None)
    if not length:
        raise ConfigError("the model states no context length: give --max-context")
    return int(length)


# ---- the loop ----


class BargainingTask:
    """Bargaining's rollouts, rewards and tournament-slice evaluation, as ``grpo.train_grpo``
    runs them."""

    metric = "score"

    def __init__(self, args: BargainingArgs):
        """Train on ``args`` (checked)."""
        self.args = args
        self.game = training_game(args)
        self.evaluates = args.evaluates
        self.agent: ContextLimit | None = None
        self.backend: RolloutBackend | None = None
        self.opponent = opponent_agent("bargaining", args.opponent)

    def start(self, policy: Any, tokenizer: Any) -> None:
        """Builds the rollout agent; evaluates the base model once when starting from an
        adapter."""
        args = self.args
        self.backend = rollout_backend(policy, tokenizer, args, f"bargaining:{args.model}")
        sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
        llm = LLMAgent(self.backend, self.game, sampling, name=POLICY)
        self.agent = ContextLimit(llm, tokenizer, context_of(policy, args), args.max_new_tokens)
        if args.evaluates and args.adapter and not (args.out / BASE_EVAL).exists():
            write_json(args.out / BASE_EVAL, evaluate_base(args))

    def rollouts(self, step: int) -> StepRollouts:
        """The step's rollouts in both roles, their rewards and the answers they train (an
        overflowed rollout's answers weigh 0 and are left out)."""
        assert self.agent is not None and self.backend is not None, "start() builds the agent"
        self.backend.reset_prefix_cache()  # the weights changed: no stale KV
        specs = rollout_specs(self.agent, self.opponent, self.args, step)
        traces = list(play(role_game(self.game), specs, max_live=len(specs)))
        groups = step_groups(traces, self.args)
        samples = [s for s in samples_from(groups, self.args) if s.weight > 0]
        return StepRollouts(samples, step_summary(groups))

    def evaluate(self, policy: Any, tokenizer: Any, step: int) -> dict[str, Any]:
        """The tournament slice of checkpoint ``step``."""
        return evaluate_checkpoint(policy, tokenizer, self.args, step)

    def headline(self, row: dict[str, Any]) -> dict[str, Any]:
        """Every value of the row."""
        return {k: v["value"] for k, v in row.items() if k != "step"}

    def report(self, state: TrainerState) -> None:
        """Rewrites ``stages.md`` and ``curve.png``."""
        if state.evals:
            rows = stages(state, self.args.out, self.args.adapter)
            (self.args.out / "stages.md").write_text(stage_table(rows))
        plot_curve(self.args.out, state)


def train_bargaining(args: BargainingArgs, log: Log = print) -> Path:
    """Run (or resume) bargaining GRPO; returns the run folder."""
    args.check()
    return train_grpo(args, BargainingTask(args), torch_seed="bargaining-torch", log=log)


def step_summary(groups: list[Group]) -> dict[str, float]:
    """The step's mean reward and reward terms over the rollouts that did not overflow (an
    overflow has reward 0 and loss weight 0: it would drag the means to 0), its deal rate over
    the same rollouts, and how many overflowed (``overflowed``, ``overflow_rate``)."""
    pairs = [(r, t) for g in groups for r, t in zip(g.rewards, g.traces, strict=True)]
    kept = [(r, t) for r, t in pairs if not r.overflow]
    n = max(len(kept), 1)
    out = {"reward": sum(r.total for r, _ in kept) / n}
    for term in ("format", "execution", "consistency", "surplus", "ir"):
        out[term] = sum(getattr(r, term) for r, _ in kept) / n
    out["deal_rate"] = sum(bool(t.rounds[0].info["deal"]) for _, t in kept) / n
    out["overflowed"] = float(len(pairs) - len(kept))
    out["overflow_rate"] = (len(pairs) - len(kept)) / max(len(pairs), 1)
    return out
