"""Bargaining GRPO: an LLM learns bilateral trade against a fixed opponent (SPEC §8, Training;
seed 004 §5.3, Eq. 5-8, Table 8, App. B.2-B.4). One readable loop on the shared trainer parts
(``sepo.load_policy``, ``sepo.pack``, ``sepo.update``, ``checkpoints.Checkpoints``); the reward is
the pure functions ``reward`` and ``Reward.total``.

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
   self-violation. The checkpoint score is Table 7's ranking score over both roles: the mean
   over GFT negotiations of one's surplus share, 0 without a valid deal (= surplus share × deal
   rate). ``best.json`` names the best checkpoint, which rotation keeps; ``stages.md`` is the
   Base → SFT → RL table (Base is evaluated once when training starts from an SFT adapter).

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

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from stratagem.agent import Decision
from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Sampling
from stratagem.backends.embedded import EMBEDDED, embedded_dir
from stratagem.backends.hf import HFBackend
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError, GameError
from stratagem.game import Observation, Seat, chat_for
from stratagem.games import get_game
from stratagem.games.bargaining import BUYER, SELLER, Bargaining, Call, Turn
from stratagem.metrics.bargaining import ROLES, consistency_checks, negotiation_rows
from stratagem.metrics.estimate import Estimate, mean_estimate
from stratagem.play import play
from stratagem.seeding import derive
from stratagem.strategies import get_strategy
from stratagem.trace import Trace
from stratagem.training.advantages import step_advantages
from stratagem.training.checkpoints import Checkpoints, TrainerState
from stratagem.training.rollouts import RolloutState
from stratagem.training.sepo import Turn as Sample
from stratagem.training.sepo import load_policy, pack, per_decision, update

IR_PENALTY = 1.0  # subtracted for a deal with negative own utility (with ir_penalty)
WALK_AWAY_CREDIT = 1.0  # added for an NGFT scenario that ends without a deal (with ir_penalty)
QUIT = Turn((Call("quit_negotiation"),), "the conversation no longer fits in my context")
POLICY = "policy"  # the trained agent's name in evaluation traces
BASE_EVAL = "base_eval.json"


@dataclass
class BargainingArgs:
    """Hyperparameters of ``stratagem train bargaining`` (defaults: seed 004 Table 13 where
    legible, SPEC §6 otherwise)."""

    model: str = EMBEDDED
    """``embedded`` (SmolLM2-135M-Instruct), a Hugging Face id or a local folder."""
    adapter: str | None = None
    """Start from this LoRA adapter (an SFT run): it is merged into the weights, which become the
    KL reference, and GRPO trains a fresh LoRA on top."""
    out: Path = Path("runs/bargaining")
    """The run folder: checkpoints, best.json, stages.md, curve.png."""
    steps: int = 100
    """GRPO steps (a resumed run may be given more)."""
    scenarios: int = 8
    """Scenarios per step; each is played in both roles, so a step has 2 × scenarios groups."""
    rollouts: int = 8
    """n rollouts per (scenario, role) group; they share the episode seed."""
    opponent: str = "Boulware"
    """The fixed opponent: a bargaining strategy."""
    ir_penalty: bool = False
    """Beyond the paper: −1 for a deal with negative own utility, +1 for ending an NGFT scenario
    without a deal. Off reproduces seed 004's reward."""
    max_context: int | None = None
    """Tokens of context (prompt + max_new_tokens) a decision may use; longer ends the episode
    with reward 0 and loss weight 0. Default: the model's context length."""
    scale: Literal["group", "step"] = "group"
    """Advantage scale: each group's own std (Eq. 7), or one std pooled over the step."""
    clip: float = 0.2
    """PPO clip ε."""
    kl: float = 0.05
    """β of the one-sided KL against the starting policy."""
    learning_rate: float = 1e-5
    """AdamW learning rate."""
    grad_clip: float = 1.0
    """Max gradient norm."""
    epochs: int = 1
    """Optimiser steps per batch of rollouts (the PPO ratio moves from the second on)."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts; log-probs and KL are taken at it too."""
    max_new_tokens: int = 256
    """Generated tokens per answer at most."""
    max_rounds: int = 10
    """The negotiation's round limit (a round is one turn)."""
    lora_rank: int = 16
    """Rank of the LoRA (attention projections)."""
    lora_alpha: int = 32
    """LoRA α."""
    lora_dropout: float = 0.05
    """LoRA dropout (active in the update, not in rollouts)."""
    checkpoint_every: int = 10
    """Checkpoint (and evaluate) every k steps."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints (the newest ones, plus always the best); None: all."""
    eval_gft: int = 8
    """GFT validation scenarios of the checkpoint tournament slice, each in both roles (0 with
    eval_ngft 0: no evaluation)."""
    eval_ngft: int = 4
    """NGFT validation scenarios of the checkpoint tournament slice, each in both roles."""
    eval_opponents: list[str] = field(default_factory=lambda: ["Boulware"])
    """Opponents of the checkpoint tournament slice (bargaining strategies)."""
    seed: int = 42
    """Seeds the scenarios, the sampling, the LoRA initialisation and the evaluation."""
    chunk: int = 32
    """Positions per chunk of the log-prob computation."""
    packing: bool = True
    """One sequence per episode (every token read once); off: one per answer."""

    def check(self) -> None:
        """Refuse, before any model loads, what this trainer cannot run.

        Raises:
            ConfigError: naming the option and the value it needs.
        """
        for name, least in (
            ("steps", 0),
            ("scenarios", 1),
            ("rollouts", 2),
            ("max_new_tokens", 1),
            ("max_rounds", 2),
            ("checkpoint_every", 1),
            ("eval_gft", 0),
            ("eval_ngft", 0),
            ("epochs", 1),
            ("chunk", 1),
        ):
            value = getattr(self, name)
            if value < least:
                flag = "--" + name.replace("_", "-")
                why = " (GRPO compares rollouts)" if name == "rollouts" else ""
                raise ConfigError(f"{flag} must be at least {least}{why}, got {value}")
        if self.temperature <= 0:
            raise ConfigError("GRPO samples its rollouts: --temperature must be above 0")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        if self.max_context is not None and self.max_context <= self.max_new_tokens:
            raise ConfigError(
                f"--max-context ({self.max_context}) must exceed --max-new-tokens "
                f"({self.max_new_tokens})"
            )
        if self.eval_ngft and not self.eval_gft:
            raise ConfigError("--eval-gft must be at least 1: the checkpoint score is GFT's")
        for name in [self.opponent, *self.eval_opponents]:
            get_strategy("bargaining", name)  # UnknownNameError, with "did you mean"
        for folder in (self.adapter or "").split(","):
            if folder and not Path(folder).is_dir():
                raise ConfigError(f"--adapter {folder}: no such adapter folder")

    def fingerprint(self) -> dict[str, Any]:
        """Returns the arguments that identify a run, as JSON values: ``steps`` and
        ``save_total_limit`` are left out, so a run can be resumed with more steps or another
        disk policy."""
        d = asdict(self)
        d.pop("steps")
        d.pop("save_total_limit")
        d["out"] = str(d["out"])
        return d

    @property
    def evaluates(self) -> bool:
        """Whether checkpoints are evaluated."""
        return self.eval_gft + self.eval_ngft > 0


# ---- the reward (seed 004 Table 8) ----


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


# ---- rollouts ----


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

    def __init__(self, game: Bargaining):
        """Wrap ``game``."""
        self._game = game

    def from_scenario(self, scenario: tuple[int, int], seed: int) -> RolloutState:
        """Rollout r of the group of ``seed``, its trained seat's decision seeds salted by r."""
        r, seat = scenario
        return RolloutState(self._game.new_episode(seed), int(r), int(seat))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._game, name)


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


def evaluation_specs(
    agent: Any, opponents: list[str], scenarios: list[Any], seed: int
) -> list[EpisodeSpec]:
    """``agent`` against each opponent in both roles on every scenario (the agent's row and
    column of a round robin on the same scenarios)."""
    specs = []
    for name in opponents:
        opponent = get_strategy("bargaining", name)
        for i, scenario in enumerate(scenarios):
            episode_seed = derive(seed, "bargaining-eval", i)
            for seat in (SELLER, BUYER):
                agents = (agent, opponent) if seat == SELLER else (opponent, agent)
                meta = {"seat": seat, "opponent": name, "index": i}
                episode_id = f"{name}/{ROLES[seat]}/{i}"
                specs.append(EpisodeSpec(episode_id, episode_seed, agents, meta, scenario))
    return specs


def tournament_slice(
    game: Bargaining, agent: Any, opponents: list[str], gft: int, ngft: int, seed: int
) -> dict[str, Any]:
    """Plays ``agent`` against ``opponents`` in both roles on ``gft`` + ``ngft`` scenarios of
    ``game`` and returns its row: per role the GFT ``deal_rate``, ``surplus_share`` (valid
    deals), ``violation`` and the NGFT ``ngft_violation`` (keys ``seller/deal_rate`` ...), and
    ``score``, each ``{"value", "stderr", "n"}``."""
    scenarios = game.tournament_scenarios(gft, ngft, seed)
    specs = evaluation_specs(agent, opponents, scenarios, seed)
    rows = [r for r in negotiation_rows(play(game, specs)) if r["agent"] == agent.name]
    out: dict[str, Any] = {}
    for role in ROLES:
        gft_rows = [r for r in rows if r["role"] == role and r["regime"] == "GFT"]
        ngft_rows = [r for r in rows if r["role"] == role and r["regime"] == "NGFT"]
        shares = [r["surplus_share"] for r in gft_rows if not math.isnan(r["surplus_share"])]
        out[f"{role}/deal_rate"] = mean_estimate([r["deal"] for r in gft_rows])
        out[f"{role}/surplus_share"] = mean_estimate(shares)
        out[f"{role}/violation"] = mean_estimate([r["violation"] for r in gft_rows])
        out[f"{role}/ngft_violation"] = mean_estimate([r["violation"] for r in ngft_rows])
    out["score"] = mean_estimate(
        [
            0.0 if math.isnan(r["surplus_share"]) else r["surplus_share"]
            for r in rows
            if r["regime"] == "GFT"
        ]
    )
    return {k: asdict(v) if isinstance(v, Estimate) else v for k, v in out.items()}


def evaluation_game(args: BargainingArgs) -> Bargaining:
    """The validation split, at the training round limit."""
    return get_game("bargaining", split="validation", max_rounds=args.max_rounds)


def evaluate_model(model, tokenizer, args: BargainingArgs, label: str) -> dict[str, Any]:
    """The tournament slice of ``model`` answering greedily (an overflow quits, as in training)."""
    model.eval()
    game = evaluation_game(args)
    backend = HFBackend.from_model(model, tokenizer, model_id=label, prefix_reuse=True)
    llm = LLMAgent(backend, game, Sampling(0.0, 1.0, args.max_new_tokens), name=POLICY)
    agent = ContextLimit(llm, tokenizer, context_of(model, args), args.max_new_tokens)
    return tournament_slice(
        game, agent, args.eval_opponents, args.eval_gft, args.eval_ngft, args.seed + 1
    )


def evaluate_checkpoint(policy, tokenizer, args: BargainingArgs, step: int) -> dict[str, Any]:
    """The tournament slice of the current policy, as checkpoint ``step``'s row."""
    row = evaluate_model(policy, tokenizer, args, f"bargaining:{args.model}@{step}")
    return {"step": step, **row}


def evaluate_base(args: BargainingArgs) -> dict[str, Any]:
    """The tournament slice of the base model, without the SFT adapter (the Base stage)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = str(embedded_dir()) if args.model == EMBEDDED else args.model
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    gpu = torch.cuda.is_available()
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if gpu else torch.float32
    ).to("cuda" if gpu else "cpu")
    return evaluate_model(model, tokenizer, args, f"bargaining:{args.model}")


def context_of(model, args: BargainingArgs) -> int:
    """``max_context``, or the model's context length."""
    if args.max_context is not None:
        return args.max_context
    config = model.get_base_model().config if hasattr(model, "get_base_model") else model.config
    length = getattr(config, "max_position_embeddings", None)
    if not length:
        raise ConfigError("the model states no context length: give --max-context")
    return int(length)


# ---- the loop ----


def train_bargaining(args: BargainingArgs, log=print) -> Path:
    """Run (or resume) bargaining GRPO; returns the run folder."""
    args.check()
    game = get_game("bargaining", split="train", max_rounds=args.max_rounds)
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
            torch.manual_seed(derive(args.seed, "bargaining-torch") % 2**63)  # LoRA dropout
        if state.step:
            log(f"resuming {args.out} from checkpoint-{state.step}")
        policy.eval()
        backend = HFBackend.from_model(
            policy, tokenizer, model_id=f"bargaining:{args.model}", prefix_reuse=True
        )
        sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
        llm = LLMAgent(backend, game, sampling, name=POLICY)
        agent = ContextLimit(llm, tokenizer, context_of(policy, args), args.max_new_tokens)
        opponent = get_strategy("bargaining", args.opponent)
        if args.evaluates and args.adapter and not (args.out / BASE_EVAL).exists():
            _write_json(args.out / BASE_EVAL, evaluate_base(args))
        if state.step == 0 and args.evaluates and not state.evals:
            checkpoint(ckpt, state, policy, optimizer, tokenizer, args, log)  # the starting policy
        for step in range(state.step, args.steps):
            start = time.perf_counter()
            backend.reset_prefix_cache()  # the weights changed: no stale KV
            specs = rollout_specs(agent, opponent, args, step)
            traces = list(play(RoleRollouts(game), specs, max_live=len(specs)))
            groups = step_groups(traces, args)
            samples = [s for s in samples_from(groups, args) if s.weight > 0]
            sequences = pack(samples) if args.packing else per_decision(samples)
            rolled = time.perf_counter()
            epochs = update(policy, optimizer, params, sequences, args)
            entry = {
                "step": step + 1,
                **step_summary(groups),
                "samples": len(samples),
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
                checkpoint(ckpt, state, policy, optimizer, tokenizer, args, log)
        ckpt.run.finish("complete", steps=state.step)
    return args.out


def step_summary(groups: list[Group]) -> dict[str, float]:
    """The step's mean reward and reward terms over its rollouts, its deal and overflow rates."""
    rewards = [r for g in groups for r in g.rewards]
    traces = [t for g in groups for t in g.traces]
    n = max(len(rewards), 1)
    out = {"reward": sum(r.total for r in rewards) / n}
    for term in ("format", "execution", "consistency", "surplus", "ir"):
        out[term] = sum(getattr(r, term) for r in rewards) / n
    out["deal_rate"] = sum(bool(t.rounds[0].info["deal"]) for t in traces) / n
    out["overflow_rate"] = sum(r.overflow for r in rewards) / n
    return out


def checkpoint(
    ckpt: Checkpoints, state: TrainerState, policy, optimizer, tokenizer, args, log
) -> None:
    """Evaluate the policy (if asked), save the checkpoint, rewrite stages.md and curve.png."""
    if args.evaluates:
        row = evaluate_checkpoint(policy, tokenizer, args, state.step)
        state.record_eval(row, "score")
        values = {k: v["value"] for k, v in row.items() if k != "step"}
        log(json.dumps({"step": state.step, **values}))
    ckpt.save(state, policy, optimizer)
    if state.evals:
        (args.out / "stages.md").write_text(stage_table(stages(state, args)))
    _plot_curve(args.out, state)


def stages(state: TrainerState, args: BargainingArgs) -> list[tuple[str, dict[str, Any]]]:
    """(label, evaluation row) of each training stage so far: Base, SFT (when training started
    from an adapter), RL (the best checkpoint and, when another, the last)."""
    out: list[tuple[str, dict[str, Any]]] = []
    base = args.out / BASE_EVAL
    if args.adapter:
        if base.exists():
            out.append(("Base", json.loads(base.read_text())))
        out.append(("SFT", state.evals[0]))
    else:
        out.append(("Base", state.evals[0]))
    if state.best is not None and state.best.step > 0:
        best = next(e for e in state.evals if e["step"] == state.best.step)
        out.append((f"RL (best, step {best['step']})", best))
    last = state.evals[-1]
    if last["step"] > 0 and (state.best is None or last["step"] != state.best.step):
        out.append((f"RL (last, step {last['step']})", last))
    return out


STAGE_COLUMNS = (
    ("deal_rate", "GFT deal rate %"),
    ("surplus_share", "surplus share %"),
    ("violation", "GFT violation %"),
    ("ngft_violation", "NGFT violation %"),
)


def stage_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """A Markdown table: one line per (stage, role), percentages ± one standard error, and the
    checkpoint score (Table 7's surplus share × deal rate over both roles)."""
    head = ["stage", "role", *(title for _, title in STAGE_COLUMNS), "score %"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * 2 + ["---:"] * 5) + " |"]
    for label, row in rows:
        for role in ROLES:
            cells = [_percent(row.get(f"{role}/{key}")) for key, _ in STAGE_COLUMNS]
            lines.append(
                f"| {label} | {role} | " + " | ".join(cells) + f" | {_percent(row['score'])} |"
            )
    return "\n".join(lines) + "\n"


def _percent(e: dict[str, Any] | None) -> str:
    if not e or not e["n"]:
        return "–"
    return f"{100 * e['value']:.1f} ± {100 * e['stderr']:.1f}"


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, path)


def _plot_curve(out: Path, state: TrainerState) -> None:
    """``curve.png``: the checkpoint score and per-role GFT deal rate (± one standard error),
    and the mean rollout reward per step with its four terms."""
    if not state.evals and not state.log:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    if state.evals:
        steps = [e["step"] for e in state.evals]
        for key in ("score", "seller/deal_rate", "buyer/deal_rate", "seller/ngft_violation"):
            values = [e[key]["value"] for e in state.evals]
            errors = [e[key]["stderr"] for e in state.evals]
            ax.errorbar(steps, values, yerr=errors, label=key, marker="o", capsize=3)
        ax.set_xlabel("step")
        ax.legend()
        ax.set_title("checkpoints (greedy tournament slice)")
    if state.log:
        steps = [e["step"] for e in state.log]
        for key in ("reward", "format", "execution", "consistency", "surplus"):
            bx.plot(steps, [e[key] for e in state.log], marker=".", label=key)
        bx.set_xlabel("step")
        bx.legend()
        bx.set_title("mean rollout reward and its terms")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)
    plt.close(fig)
