"""SEPO-GRPO: safety-regularised group-relative policy optimisation (SPEC §6; seed 000 §3.2-3.5,
Alg. 1, Table 17). One readable loop; the maths lives in ``advantages.py``, ``losses.py`` and
``logprobs.py``.

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
4. Loss: the PPO clipped surrogate (ε 0.2) on the ratio to the rollout-time log-probabilities,
   plus β · one-sided KL against the same model with its LoRA adapter disabled, both at the
   sampling temperature; every generated token of decision t carries its round's advantage.
   ``epochs`` optimiser steps per batch of rollouts (one backward each, accumulated over
   sequences), with gradient clipping.
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
  "freshly sampled opponent"), and its x_r is the rollout's own externality;
- each decision's token losses are averaged over its tokens, then weighted by
  ``group weight / (rollouts × rounds)``, so long answers do not outweigh short ones;
- decisions settled by the constrained fallback still train the tokens the model generated,
  with the advantage of the action that was played.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from stratagem.agent import Agent
from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Sampling
from stratagem.backends.embedded import EMBEDDED, embedded_dir
from stratagem.backends.hf import HFBackend
from stratagem.errors import ConfigError
from stratagem.game import Game
from stratagem.games import get_game
from stratagem.metrics.sepo import SEPOGame, as_sepo_game
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy
from stratagem.trace import Trace
from stratagem.training.advantages import (
    group_weight,
    penalty,
    shape_rewards,
    step_advantages,
    subtract_penalty,
)
from stratagem.training.checkpoints import Checkpoints, TrainerState
from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.losses import policy_loss
from stratagem.training.rollouts import RolloutGame


@dataclass
class SEPOArgs:
    """Hyperparameters of ``stratagem train sepo`` (defaults: SPEC §6 / seed 000 Table 17)."""

    game: str = "kuhn"
    """A SEPO game: ipd, auction, negotiation, multi_issue or kuhn."""
    model: str = EMBEDDED
    """``embedded`` (SmolLM2-135M-Instruct), a Hugging Face id or a local folder."""
    adapter: str | None = None
    """Start from this LoRA adapter (an SFT run): it is merged into the weights, which become the
    KL reference, and SEPO trains a fresh LoRA on top."""
    out: Path = Path("runs/sepo")
    """The run folder: checkpoints, best.json, curve.png."""
    steps: int = 100
    """SEPO steps (a resumed run may be given more)."""
    rollouts: int = 4
    """n rollouts per opponent; a group shares its episode seed."""
    penalty: Literal["shared", "per_rollout", "own_episodes"] = "own_episodes"
    """Where the safety terms enter: own_episodes (the gradient of J), per_rollout (Eq. 3),
    shared (Alg. 1; zero gradient, an ablation)."""
    credit: Literal["return", "immediate"] = "return"
    """A round's return: reward-to-go, or the round's own reward (the paper's literal form)."""
    normalisation: Literal["round", "episode"] = "round"
    """Advantages per round, or the episode's for every round (ablation)."""
    scale: Literal["step", "group"] = "step"
    """One std pooled over the step (λ keeps its meaning), or each group's own (ablation)."""
    normalise: bool = True
    """Payoffs × 3 / reference payoff in rewards, evaluation and the best-checkpoint choice."""
    clip: float = 0.2
    """PPO clip ε."""
    kl: float | None = None
    """β of the one-sided KL; default 0.01 (the game may declare another: Kuhn 0.2)."""
    learning_rate: float | None = None
    """AdamW learning rate; default 1e-5 (Kuhn 3e-6)."""
    grad_clip: float = 1.0
    """Max gradient norm."""
    epochs: int = 1
    """Optimiser steps per batch of rollouts (the PPO ratio moves from the second on)."""
    temperature: float = 0.8
    """Sampling temperature of the rollouts; log-probs and KL are taken at it too."""
    max_new_tokens: int = 256
    """Generated tokens per decision at most."""
    lora_rank: int = 16
    """Rank of SEPO's LoRA (attention projections)."""
    lora_alpha: int = 32
    """LoRA α."""
    lora_dropout: float = 0.05
    """LoRA dropout (active in the update, not in rollouts)."""
    checkpoint_every: int = 10
    """Checkpoint (and evaluate) every k steps."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints (the newest ones, plus always the best); None: all."""
    eval_episodes: int = 20
    """Episodes per opponent in the checkpoint evaluation (0: skip it)."""
    seed: int = 42
    """Seeds every episode, the LoRA initialisation and the evaluation."""
    chunk: int = 32
    """Positions per chunk of the log-prob computation."""
    packing: bool = True
    """One sequence per episode (every token read once); off: one per decision (the naive form,
    for comparison)."""
    rollout_engine: Literal["hf", "vllm"] = "hf"
    """What samples the rollouts: hf (the policy itself, in transformers) or vllm (a vLLM engine
    on a GPU serving the base weights, SFT adapter merged, plus SEPO's LoRA, saved under
    out/rollout and reloaded after each step); transformers computes the gradients either way."""

    def check(self) -> None:
        """Refuse, before any model loads, what SEPO cannot train or would silently misread.

        Raises:
            ConfigError: naming the option and the value it needs.
        """
        from stratagem.games import GAMES

        if not isinstance(get_game(self.game), SEPOGame):
            sepo_games = [n for n in GAMES if isinstance(get_game(n), SEPOGame)]
            raise ConfigError(
                f"SEPO trains only the SEPO games ({', '.join(sepo_games)}), not {self.game}"
            )
        for name, least in (
            ("steps", 0),
            ("rollouts", 1),
            ("max_new_tokens", 1),
            ("checkpoint_every", 1),
            ("eval_episodes", 0),
            ("epochs", 1),
            ("chunk", 1),
        ):
            value = getattr(self, name)
            if value < least:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} must be at least {least}, got {value}")
        if self.temperature <= 0:
            raise ConfigError("SEPO samples its rollouts: --temperature must be above 0")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        for folder in (self.adapter or "").split(","):
            if folder and not Path(folder).is_dir():
                raise ConfigError(f"--adapter {folder}: no such adapter folder")
        if self.rollout_engine == "vllm":
            from stratagem.backends.vllm import vllm_unavailable

            if (reason := vllm_unavailable()) is not None:
                raise ConfigError(f"--rollout-engine vllm: {reason}")

    def resolved(self) -> SEPOArgs:
        """Returns these args with unset per-game defaults filled from the game's
        ``train_defaults`` (SEPO: β 0.01, lr 1e-5; Kuhn declares β 0.2, lr 3e-6)."""
        defaults = {
            "kl": 0.01,
            "learning_rate": 1e-5,
            **as_sepo_game(get_game(self.game)).train_defaults,
        }
        return SEPOArgs(
            **{
                **asdict(self),
                "kl": self.kl if self.kl is not None else defaults["kl"],
                "learning_rate": self.learning_rate
                if self.learning_rate is not None
                else defaults["learning_rate"],
            }
        )

    def fingerprint(self) -> dict[str, Any]:
        """Returns the resolved arguments that identify a run, as JSON values: ``steps`` and
        ``save_total_limit`` are left out, so a run can be resumed with more steps or another disk
        policy.
        """
        d = asdict(self.resolved())
        d.pop("steps")  # a resumed run may be extended
        d.pop("save_total_limit")  # disk policy, not training
        d["out"] = str(d["out"])
        if d.get("rollout_engine") == "hf":  # the default: runs made before the option resume
            d.pop("rollout_engine")
        return d


@dataclass(frozen=True)
class Turn:
    """One generated decision of the agent: its tokens, the rollout-time log-probabilities of
    them, its round's advantage and its weight in the step's loss."""

    episode: str
    prompt_ids: list[int]
    token_ids: list[int]
    old_logprobs: list[float]
    advantage: float
    weight: float  # group weight / (rollouts × rounds); split evenly over the tokens


@dataclass
class Group:
    """The rollouts of one step against one opponent, and their per-round rewards."""

    pool: str
    opponent: str
    traces: list[Trace]
    rewards: torch.Tensor  # (rollouts, rounds)
    weight: float
    penalties: list[float] = field(default_factory=list)  # P per rollout (shared, per_rollout)


def load_policy(args: SEPOArgs):
    """The base model (with the SFT adapter merged in, if any), a fresh trainable LoRA on top,
    and the tokenizer."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = str(embedded_dir()) if args.model == EMBEDDED else args.model
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # bf16 weights on a GPU (PEFT keeps the LoRA weights in fp32); fp32 on CPU, bit-reproducible
    gpu = torch.cuda.is_available()
    base = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if gpu else torch.float32
    ).to("cuda" if gpu else "cpu")
    if args.adapter:  # the SFT policy is the start and the reference, as in the paper
        for folder in args.adapter.split(","):
            base = PeftModel.from_pretrained(base, folder).merge_and_unload()
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):  # the adapter's initial weights follow the seed
        torch.manual_seed(derive(args.seed, "lora-init") % 2**63)
        return get_peft_model(base, lora), tokenizer


# ---- rollouts ----


def groups_for(game: str, penalty_mode: str) -> list[tuple[str, str]]:
    """(pool, opponent) of every group whose episodes a step trains on."""
    pools = get_pools(game)
    wanted = ("train", "exploit", "collusive") if penalty_mode == "own_episodes" else ("train",)
    return [(pool, name) for pool in wanted for name in getattr(pools, pool)]


def rollout_specs(agent: Agent, game: Game, args: SEPOArgs, step: int) -> list[EpisodeSpec]:
    """The step's episodes, ``agent`` in seat 0: n per trained group (one seed per group, rollout
    r as the scenario of a ``RolloutGame``), plus the auxiliary episodes of ``shared`` (per
    group, one per exploit and collusive opponent) and ``per_rollout`` (per rollout, one freshly
    drawn exploit and one collusive opponent)."""
    pools = get_pools(game.name)
    specs = []

    def spec(episode_id: str, seed: int, opponent: str, meta: dict, rollout=None) -> EpisodeSpec:
        agents = (agent, get_strategy(game.name, opponent))
        return EpisodeSpec(episode_id, seed, agents, {"seat": 0, **meta}, scenario=rollout)

    for pool, name in groups_for(game.name, args.penalty):
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


def rollout_agent(policy, tokenizer, game: Game, args: SEPOArgs) -> LLMAgent:
    """The agent that plays the rollouts, sampling at ``args.temperature``: the policy through
    transformers (``hf``), or through a vLLM engine (``vllm``, ``TrainerVLLMBackend``: the base
    weights with the SFT adapter merged are written once to ``out/rollout/base``, and the
    policy's LoRA is saved and reloaded whenever the loop calls ``reset_prefix_cache``, i.e.
    after each step)."""
    model_id = f"sepo:{args.model}"
    if args.rollout_engine == "vllm":
        from stratagem.backends.vllm_trainer import TrainerVLLMBackend

        served = None  # the policy's base as written by the backend: the SFT adapter merged
        if not args.adapter:
            served = str(embedded_dir()) if args.model == EMBEDDED else args.model
        backend: Any = TrainerVLLMBackend(
            policy,
            tokenizer,
            args.out / "rollout",
            model=served,
            model_id=model_id,
            lora_rank=args.lora_rank,
            seed=args.seed,
        )
    else:
        backend = HFBackend.from_model(policy, tokenizer, model_id=model_id, prefix_reuse=True)
    sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
    return LLMAgent(backend, game, sampling, fallback="sample")


def rollout(agent: LLMAgent, args: SEPOArgs, step: int) -> list[Trace]:
    """Plays the step's episodes together (one batched generation per tick); rollouts of a
    group share their episode seed and differ only in the agent's sampling."""
    specs = rollout_specs(agent, agent.game, args, step)
    return list(play(RolloutGame(agent.game), specs, max_live=len(specs)))


# ---- rewards and advantages ----


def payoff_scale(game: SEPOGame, normalise: bool) -> float:
    """``3 / reference_payoff`` when normalising (SPEC §3), else 1."""
    return 3.0 / game.reference_payoff if normalise else 1.0


def _per_round(traces: list[Trace], value) -> torch.Tensor:
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


def step_groups(traces: list[Trace], game: Any, args: SEPOArgs) -> list[Group]:
    """The trained groups of a step with their per-round rewards, shaped by the penalty mode."""
    game = as_sepo_game(game)
    s = payoff_scale(game, args.normalise)
    weights = game.safety.for_phase("train")
    pools = get_pools(game.name)
    complete = [t for t in traces if t.status == "complete"]
    trained: dict[str, list[Trace]] = defaultdict(list)
    aux: dict[str, list[Trace]] = defaultdict(list)
    for t in complete:
        if "aux_of" in t.meta:
            aux[t.meta["aux_of"]].append(t)
        else:
            trained[t.meta["opponent"]].append(t)
    groups = []
    for pool, name in groups_for(game.name, args.penalty):
        group = sorted(trained.get(name, []), key=lambda t: t.meta["rollout"])
        if not group:
            continue  # every rollout of this group failed: it has nothing to train on
        own = s * _per_round(group, lambda r: r.payoffs[0])
        weight = group_weight(len(getattr(pools, pool)))
        if args.penalty == "own_episodes":
            opponent = s * _per_round(group, lambda r: r.payoffs[1])
            greedy = _per_round(group, lambda r: game.collusive_act(r, 0))
            external = _per_round(group, game.externality)
            rewards = shape_rewards(own, opponent, greedy, external, pool, weights)
            groups.append(Group(pool, name, group, rewards, weight))
        else:
            ps = _penalties(args.penalty, group, aux.get(name, []), game, s)
            rewards = subtract_penalty(own, torch.tensor(ps, dtype=own.dtype))
            groups.append(Group(pool, name, group, rewards, weight, ps))
    return groups


def _penalties(
    mode: str, group: list[Trace], aux: list[Trace], game: SEPOGame, scale: float
) -> list[float]:
    """P per rollout of a train group. ``shared``: one P from the group's auxiliary episodes
    and its mean externality; ``per_rollout``: each rollout's own auxiliary episodes and its
    own externality."""
    weights = game.safety.for_phase("train")

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


def turns_from(groups: list[Group], game: Any, args: SEPOArgs) -> list[Turn]:
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


# ---- the update ----


@dataclass
class TrainSequence:
    """One forward pass: token ids and, per trained token, its position, rollout-time
    log-probability, advantage and loss weight."""

    ids: list[int]
    positions: list[int]
    old: list[float]
    advantages: list[float]
    weights: list[float]


def per_decision(turns: list[Turn]) -> list[TrainSequence]:
    """One sequence per decision: its prompt followed by its answer."""
    out = []
    for t in turns:
        start = len(t.prompt_ids)
        n = len(t.token_ids)
        out.append(
            TrainSequence(
                t.prompt_ids + t.token_ids,
                list(range(start, start + n)),
                list(t.old_logprobs),
                [t.advantage] * n,
                [t.weight / n] * n,
            )
        )
    return out


def pack(turns: list[Turn]) -> list[TrainSequence]:
    """One sequence per seat's chat: an episode's decisions, in order, where each prompt starts
    with the previous prompt and answer (the rollout continued the chat from its exact tokens),
    so forward and backward read every token once. A decision whose prompt does not continue
    the sequence (a chat template that rewrites earlier turns) starts a new one.

    Naive equivalent: ``per_decision``; the tests compare their log-probs and gradients.
    """
    out: list[TrainSequence] = []
    current: TrainSequence | None = None
    episode = None
    for t in turns:
        n = len(t.token_ids)
        continues = (
            current is not None
            and t.episode == episode
            and t.prompt_ids[: len(current.ids)] == current.ids
        )
        if current is None or not continues:
            current = TrainSequence([], [], [], [], [])
            out.append(current)
            episode = t.episode
        start = len(t.prompt_ids)
        current.ids = t.prompt_ids + t.token_ids
        current.positions += range(start, start + n)
        current.old += t.old_logprobs
        current.advantages += [t.advantage] * n
        current.weights += [t.weight / n] * n
    return out


def _tensor(values: list[float], device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def reference_logprobs(
    policy, sequences: list[TrainSequence], args: SEPOArgs, *, logprobs=sequence_logprobs
):
    """The reference policy's log-probs (adapter disabled) of every trained token, per sequence."""
    with torch.no_grad(), policy.disable_adapter():
        return [
            logprobs(policy, s.ids, s.positions, temperature=args.temperature) for s in sequences
        ]


def accumulate_gradients(
    policy, sequences, refs, args: SEPOArgs, *, logprobs=sequence_logprobs
) -> dict[str, float]:
    """Backward of the step's loss, one sequence at a time (their sum is the step's loss).

    ``logprobs`` reads a sequence's token log-probs (``logprobs.full_logits_sequence_logprobs``
    is the naive form the benchmark compares)."""
    stats = {"loss": 0.0, "kl": 0.0, "clipped": 0, "ratio_max_dev": 0.0, "tokens": 0}
    for s, ref in zip(sequences, refs, strict=True):
        new = logprobs(policy, s.ids, s.positions, temperature=args.temperature)
        device = new.device
        parts = policy_loss(
            new,
            _tensor(s.old, device),
            ref,
            _tensor(s.advantages, device),
            _tensor(s.weights, device),
            clip=args.clip,
            beta=args.kl,
        )
        parts.loss.backward()
        stats["loss"] += float(parts.loss.detach())
        stats["kl"] += parts.kl
        stats["clipped"] += parts.clipped
        stats["ratio_max_dev"] = max(stats["ratio_max_dev"], parts.ratio_max_dev)
        stats["tokens"] += parts.tokens
    return stats


def update(
    policy, optimizer, params, sequences, args: SEPOArgs, *, logprobs=None
) -> list[dict[str, float]]:
    """``epochs`` optimiser steps on one batch of rollouts; returns each epoch's stats."""
    if logprobs is None:
        logprobs = functools.partial(sequence_logprobs, chunk=args.chunk)
    policy.eval()  # the reference has no adapter, hence no dropout either way
    refs = reference_logprobs(policy, sequences, args, logprobs=logprobs)
    policy.train()
    out = []
    for _ in range(args.epochs):
        optimizer.zero_grad(set_to_none=True)
        stats = accumulate_gradients(policy, sequences, refs, args, logprobs=logprobs)
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, args.grad_clip))
        optimizer.step()
        out.append(stats)
    policy.eval()
    return out


# ---- the loop ----


def train_sepo(args: SEPOArgs, log=print) -> Path:
    """Run (or resume) SEPO training; returns the output folder."""
    args.check()
    args = args.resolved()
    game = get_game(args.game)
    policy, tokenizer = load_policy(args)
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.learning_rate)
    runtime = {"steps": args.steps, "save_total_limit": args.save_total_limit}
    with Checkpoints(
        args.out, args.fingerprint(), keep=args.save_total_limit, runtime=runtime
    ) as ckpt:
        state = ckpt.resume(policy, optimizer)  # restores the torch RNG too
        if state is None:
            state = TrainerState(below=args.adapter)
            torch.manual_seed(derive(args.seed, "sepo-torch") % 2**63)  # LoRA dropout draws
        if state.step:
            log(f"resuming {args.out} from checkpoint-{state.step}")
        policy.eval()
        agent = rollout_agent(policy, tokenizer, game, args)
        backend = agent.backend
        if state.step == 0 and args.eval_episodes and not state.evals:
            # the starting policy (base or SFT) on the same footing as every later checkpoint
            checkpoint(ckpt, state, policy, optimizer, tokenizer, game, args, log)
        for step in range(state.step, args.steps):
            start = time.perf_counter()
            backend.reset_prefix_cache()  # the weights changed: no stale KV
            traces = rollout(agent, args, step)
            groups = step_groups(traces, game, args)
            turns = turns_from(groups, game, args)
            sequences = pack(turns) if args.packing else per_decision(turns)
            rolled = time.perf_counter()
            epochs = update(policy, optimizer, params, sequences, args)
            entry = {
                "step": step + 1,
                "reward": _mean([float(g.rewards.sum(-1).mean()) for g in groups]),
                "penalty": _mean([p for g in groups for p in g.penalties]),
                "samples": len(turns),
                "sequences": len(sequences),
                "sequence_tokens": sum(len(q.ids) for q in sequences),
                "rollout_seconds": rolled - start,
                "seconds": time.perf_counter() - start,
                **epochs[0],
            }
            if len(epochs) > 1:
                entry["last_epoch"] = epochs[-1]
            state.log.append(entry)
            log(json.dumps(entry))
            state.step = step + 1
            if state.step % args.checkpoint_every == 0 or state.step == args.steps:
                checkpoint(ckpt, state, policy, optimizer, tokenizer, game, args, log)
        ckpt.run.finish("complete", steps=state.step)
    return args.out


def checkpoint(
    ckpt: Checkpoints, state: TrainerState, policy, optimizer, tokenizer, game, args, log
):
    """Evaluate the policy (if asked), save the checkpoint, redraw the curve."""
    if args.eval_episodes:
        row = evaluate_checkpoint(policy, tokenizer, game, args, state.step)
        state.record_eval(row, "safety_j")
        log(json.dumps({"step": state.step, **_headline(row)}))
    ckpt.save(state, policy, optimizer)
    _plot_curve(args.out, state)


def evaluate_checkpoint(policy, tokenizer, game, args: SEPOArgs, step: int) -> dict:
    """The full SEPO evaluation of the current policy (greedy), on the training payoff scale,
    plus exact Kuhn exploitability."""
    from stratagem.evaluation import evaluate

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
    return row


def _headline(row: dict) -> dict:
    keys = ("safety_j", "pay", "exploit", "collusion", "fallback_rate", "exact_exploitability")
    return {k: row[k]["value"] if isinstance(row[k], dict) else row[k] for k in keys if k in row}


def _plot_curve(out: Path, state: TrainerState) -> None:
    """``curve.png``: Safety J, Pay/r, Exploit (± one standard error) per checkpoint, and the
    mean rollout reward per step."""
    if not state.evals:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [e["step"] for e in state.evals]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for key in ("safety_j", "pay", "exploit", "collusion"):
        if key in state.evals[0]:
            values = [e[key]["value"] for e in state.evals]
            errors = [e[key]["stderr"] for e in state.evals]
            ax.errorbar(steps, values, yerr=errors, label=key, marker="o", capsize=3)
    if "exact_exploitability" in state.evals[0]:
        ax.plot(
            steps,
            [e["exact_exploitability"] for e in state.evals],
            marker="s",
            label="exact exploitability",
        )
    ax.set_xlabel("step")
    ax.legend()
    ax.set_title("SEPO checkpoints (greedy evaluation)")
    if state.log:
        bx.plot([e["step"] for e in state.log], [e["reward"] for e in state.log], marker=".")
        bx.set_xlabel("step")
        bx.set_title("mean rollout reward per group (shaped)")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)
    plt.close(fig)
