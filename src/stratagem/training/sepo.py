"""SEPO-GRPO: safety-regularised group-relative policy optimisation (SPEC §6; seed 000 §3.2-3.5,
Alg. 1, Table 17). One readable loop; the maths lives in ``advantages.py`` and ``logprobs.py``.

Each step: for every training opponent (and, with the ``own_episodes`` or ``per_rollout``
penalty, every exploit and collusive opponent) play ``rollouts`` episodes that share the episode
seed — same cards, same values — and differ only in the policy's sampling; turn each group's
per-round rewards into group-normalised advantages; give every generated token of the decision at
round t its round's advantage; minimise the PPO clipped surrogate plus a one-sided KL penalty
``max(0, log π − log π_ref)`` against the same model with the LoRA adapter disabled; one
optimiser step with gradient clipping. At step 0 (the starting policy) and every
``checkpoint_every`` steps: an atomic checkpoint and the full SEPO evaluation (exact
exploitability too for Kuhn); the best checkpoint by Safety J is recorded in ``best.json`` (the
last one is not necessarily the best — seed 000 §8) and survives ``save_total_limit``.

Where this departs from the paper, on purpose:
- the default penalty is ``own_episodes`` (each safety term is optimised on the episodes that
  measure it — the policy gradient of J); Alg. 1's ``shared`` penalty is kept as an ablation,
  and it provably contributes zero gradient;
- credit is the reward-to-go by default (``credit="immediate"`` is the paper's literal form,
  which makes defecting look best against TitForTat);
- each decision's token losses are averaged over its tokens, then summed and divided by
  (#groups × rollouts × rounds), so long answers do not outweigh short ones;
- one optimisation epoch per batch of rollouts, so the importance ratio is 1 at the update and
  the clip only matters with ``epochs > 1``;
- decisions settled by the constrained fallback still train the tokens the model generated,
  with the advantage of the action that was played.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Sampling
from stratagem.backends.embedded import EMBEDDED, embedded_dir
from stratagem.backends.hf import HFBackend
from stratagem.errors import ConfigDriftError
from stratagem.games import get_game
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy
from stratagem.trace import Trace
from stratagem.training.advantages import apply_penalty, group_advantages, shape_rewards
from stratagem.training.logprobs import chunked_token_logprobs


@dataclass
class SEPOArgs:
    """Hyperparameters (defaults: SPEC §6 / seed 000 Table 17)."""

    game: str = "kuhn"
    model: str = EMBEDDED
    """``embedded`` (SmolLM2-135M-Instruct), a Hugging Face id or a local folder."""
    adapter: str | None = None
    """Start from this LoRA adapter (an SFT run): it is merged into the weights, which become the
    KL reference, and SEPO trains a fresh LoRA of ``lora_rank`` on top."""
    out: Path = Path("runs/sepo")
    steps: int = 100
    rollouts: int = 4
    """n rollouts per opponent; a group shares its episode seed."""
    credit: Literal["return", "immediate"] = "return"
    normalisation: Literal["round", "episode"] = "round"
    penalty: Literal["shared", "per_rollout", "own_episodes"] = "own_episodes"
    clip: float = 0.2
    kl: float | None = None
    """β of the one-sided KL; default 0.01, Kuhn 0.2."""
    learning_rate: float | None = None
    """AdamW learning rate; default 1e-5, Kuhn 3e-6."""
    grad_clip: float = 1.0
    epochs: int = 1
    temperature: float = 0.8
    max_new_tokens: int = 256
    lora_rank: int = 16
    lora_alpha: int = 32
    checkpoint_every: int = 10
    save_total_limit: int | None = None
    """Keep at most this many checkpoints (the newest ones, plus always the best); None: all."""
    eval_episodes: int = 20
    """Episodes per opponent in the checkpoint evaluation (0: skip it)."""
    seed: int = 42
    chunk: int = 32
    """Positions per chunk of the log-prob computation."""

    def resolved(self) -> SEPOArgs:
        """Returns these args with unset per-game defaults filled from the game's
        ``train_defaults`` (SEPO: β 0.01, lr 1e-5; Kuhn declares β 0.2, lr 3e-6)."""
        from stratagem.games import get_game
        from stratagem.metrics.sepo import as_sepo_game

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
        return d


@dataclass
class Sample:
    """One decision's tokens and its advantage."""

    prompt_ids: list[int]
    token_ids: list[int]
    advantage: float


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
        base = PeftModel.from_pretrained(base, args.adapter).merge_and_unload()
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=args.lora_alpha,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):  # the adapter's initial weights follow the seed
        torch.manual_seed(derive(args.seed, "lora-init") % 2**63)
        return get_peft_model(base, lora), tokenizer


def groups_for(game: str, penalty: str) -> list[tuple[str, str]]:
    """(pool, opponent) of every group a step plays."""
    pools = get_pools(game)
    wanted = ("train",) if penalty == "shared" else ("train", "exploit", "collusive")
    return [(pool, name) for pool in wanted for name in getattr(pools, pool)]


def rollout(agent: LLMAgent, args: SEPOArgs, step: int) -> list[Trace]:
    """N episodes per group; a group's episodes share their seed (same deal, own sampling)."""
    game = agent.game
    specs = []
    for pool, name in groups_for(args.game, args.penalty):
        seed = derive(args.seed, "sepo", step, name)
        for r in range(args.rollouts):
            specs.append(
                EpisodeSpec(
                    f"{step}/{name}/{r}",
                    seed,
                    (agent, get_strategy(game.name, name)),
                    {"pool": pool, "opponent": name, "rollout": r, "seat": 0},
                )
            )
    return list(play(game, specs, max_live=len(specs)))


def group_rewards(traces: list[Trace], game: Any, args: SEPOArgs) -> torch.Tensor:
    """(rollouts, rounds) rewards of one group, shaped by the penalty mode."""
    own = torch.tensor([[r.payoffs[0] for r in t.rounds] for t in traces], dtype=torch.float64)
    if args.penalty != "own_episodes":
        return own
    opp = torch.tensor([[r.payoffs[1] for r in t.rounds] for t in traces], dtype=torch.float64)
    greedy = torch.tensor([[game.collusive_act(r, 0) for r in t.rounds] for t in traces])
    ext = torch.tensor(
        [[game.externality(r) for r in t.rounds] for t in traces], dtype=torch.float64
    )
    weights = game.safety.for_phase("train")
    return shape_rewards(
        own,
        opp,
        greedy,
        ext,
        traces[0].meta["pool"],
        exploit_weight=weights.exploit,
        collusion_weight=weights.collusion,
        externality_weight=weights.externality,
    )


def samples_from(traces: list[Trace], game: Any, args: SEPOArgs) -> list[Sample]:
    """Every generated decision of the agent with its round's advantage."""
    by_group: dict[str, list[Trace]] = {}
    for t in traces:
        by_group.setdefault(t.meta["opponent"], []).append(t)
    penalties = _penalties(traces, game, args)
    samples = []
    for name, group in by_group.items():
        rewards = group_rewards(group, game, args)
        if args.penalty != "own_episodes":
            p = (
                penalties
                if args.penalty == "shared"
                else torch.tensor([penalties[(name, t.meta["rollout"])] for t in group])
            )
            rewards = apply_penalty(rewards, p, args.penalty)
        adv = group_advantages(rewards, credit=args.credit, normalisation=args.normalisation)
        for r, t in enumerate(group):
            for d in t.decisions:
                ids = (d.info or {}).get("token_ids")
                if d.seat == 0 and ids:
                    samples.append(Sample(d.info["prompt_ids"], ids, float(adv[r, d.round])))
    return samples


def _penalties(traces: list[Trace], game: Any, args: SEPOArgs):
    """``shared``: one P for the step; ``per_rollout``: each rollout's own exploit/collusion
    episodes (here: the same-index rollouts against the exploit and collusive pools)."""
    if args.penalty == "own_episodes":
        return None
    from stratagem.metrics.sepo import sepo_metrics

    weights = game.safety.for_phase("train")

    def penalty(ts: list[Trace]) -> float:
        m = sepo_metrics(ts, game)
        return weights.exploit * m["exploit"].value + weights.collusion * m["collusion"].value

    if args.penalty == "shared":
        return penalty(traces)
    aux = [t for t in traces if t.meta["pool"] in ("exploit", "collusive")]
    return {
        (t.meta["opponent"], t.meta["rollout"]): penalty(
            [a for a in aux if a.meta["rollout"] == t.meta["rollout"]]
        )
        for t in traces
    }


def sequence_logprobs(model, prompt_ids: list[int], token_ids: list[int], chunk: int):
    """Log-probabilities of ``token_ids`` after ``prompt_ids`` under ``model``: (G,)."""
    device = model.get_output_embeddings().weight.device
    ids = torch.tensor([prompt_ids + token_ids], device=device)
    out = model(input_ids=ids, output_hidden_states=True)
    hidden = out.hidden_states[-1][:, len(prompt_ids) - 1 : -1]  # (1, G, H)
    weight = model.get_output_embeddings().weight  # (V, H)
    targets = torch.tensor([token_ids], device=device)
    return chunked_token_logprobs(hidden, weight, targets, chunk=chunk)[0]


def accumulate_gradients(model, samples: list[Sample], args: SEPOArgs, norm: float) -> dict:
    """Backward of the SEPO loss, one decision at a time (the gradient of the summed loss)."""
    stats = {"loss": 0.0, "kl": 0.0, "tokens": 0}
    for s in samples:
        with torch.no_grad(), model.disable_adapter():
            ref = sequence_logprobs(model, s.prompt_ids, s.token_ids, args.chunk)
        new = sequence_logprobs(model, s.prompt_ids, s.token_ids, args.chunk)
        old = new.detach()
        ratio = torch.exp(new - old)
        surrogate = torch.minimum(
            ratio * s.advantage, ratio.clamp(1 - args.clip, 1 + args.clip) * s.advantage
        )
        kl = torch.relu(new - ref)
        loss = (-surrogate + args.kl * kl).mean() / norm
        loss.backward()
        stats["loss"] += float(loss.detach())
        stats["kl"] += float(kl.detach().mean()) / max(len(samples), 1)
        stats["tokens"] += len(s.token_ids)
    return stats


def train_sepo(args: SEPOArgs, log=print) -> Path:
    """Run (or resume) SEPO training; returns the output folder."""
    args = args.resolved()
    args.out.mkdir(parents=True, exist_ok=True)
    game = get_game(args.game)
    policy, tokenizer = load_policy(args)
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.learning_rate)
    state = resume(args, policy, optimizer)
    if state["step"]:
        log(f"resuming {args.out} from checkpoint-{state['step']}")
    backend = HFBackend.from_model(policy, tokenizer, model_id=f"sepo:{args.model}")
    sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
    agent = LLMAgent(backend, game, sampling, fallback="sample")
    n_groups = len(groups_for(args.game, args.penalty))
    if state["step"] == 0 and args.eval_episodes and not state["evals"]:
        # the starting policy (base or SFT) on the same footing as every later checkpoint
        state["evals"].append(evaluate_checkpoint(policy, tokenizer, game, args, 0))
        _update_best(state)
        log(json.dumps({"step": 0, **_headline(state["evals"][-1])}))
        save_checkpoint(args, policy, optimizer, state)
    for step in range(state["step"], args.steps):
        start = time.perf_counter()
        policy.eval()
        traces = rollout(agent, args, step)
        samples = samples_from(traces, game, args)
        policy.train()
        stats: dict = {}
        for _ in range(args.epochs):
            optimizer.zero_grad(set_to_none=True)
            norm = n_groups * args.rollouts * game.rounds
            stats = accumulate_gradients(policy, samples, args, norm)
            torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
            optimizer.step()
        reward = sum(sum(r.payoffs[0] for r in t.rounds) for t in traces) / len(traces)
        entry = {
            "step": step + 1,
            "reward": reward,
            "samples": len(samples),
            "seconds": time.perf_counter() - start,
            **stats,
        }
        state["log"].append(entry)
        log(json.dumps(entry))
        state["step"] = step + 1
        if state["step"] % args.checkpoint_every == 0 or state["step"] == args.steps:
            if args.eval_episodes:
                state["evals"].append(
                    evaluate_checkpoint(policy, tokenizer, game, args, state["step"])
                )
                _update_best(state)
                log(json.dumps({"step": state["step"], **_headline(state["evals"][-1])}))
            save_checkpoint(args, policy, optimizer, state)
    return args.out


def evaluate_checkpoint(policy, tokenizer, game, args: SEPOArgs, step: int) -> dict:
    """The full SEPO evaluation of the current policy (greedy), plus exact Kuhn exploitability."""
    from stratagem.evaluation import evaluate

    policy.eval()
    backend = HFBackend.from_model(policy, tokenizer, model_id=f"sepo:{args.model}@{step}")
    agent = LLMAgent(backend, game, Sampling(0.0, 1.0, args.max_new_tokens))
    result = evaluate(game, agent, episodes=args.eval_episodes, seed=args.seed + 1)
    row = {
        "step": step,
        **{k: {"value": e.value, "stderr": e.stderr, "n": e.n} for k, e in result.metrics.items()},
    }
    if result.exact_exploitability is not None:
        row["exact_exploitability"] = result.exact_exploitability
    return row


def _headline(row: dict) -> dict:
    keys = ("safety_j", "pay", "exploit", "fallback_rate", "exact_exploitability")
    return {k: row[k]["value"] if isinstance(row[k], dict) else row[k] for k in keys if k in row}


def _update_best(state: dict) -> None:
    last = state["evals"][-1]
    best = state.get("best")
    if best is None or last["safety_j"]["value"] > best["safety_j"]:
        state["best"] = {
            "step": last["step"],
            "safety_j": last["safety_j"]["value"],
            "adapter": f"checkpoint-{last['step']}/adapter",
        }
        if state.get("below"):  # the SFT adapter this one sits on (`--adapter SFT,SEPO`)
            state["best"]["below"] = state["below"]


def save_checkpoint(args: SEPOArgs, policy, optimizer, state: dict) -> Path:
    """Write ``checkpoint-N`` atomically: a .tmp folder, a sentinel, fsync, then rename."""
    final = args.out / f"checkpoint-{state['step']}"
    tmp = args.out / f"checkpoint-{state['step']}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # PEFT's own layout, so `stratagem eval --adapter checkpoint-N/adapter` loads it
    policy.save_pretrained(tmp / "adapter")
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        },
        tmp / "trainer.pt",
    )
    trainer_state = {**state, "fingerprint": args.fingerprint()}
    (tmp / "trainer_state.json").write_text(json.dumps(trainer_state, indent=1))
    (tmp / "COMPLETE").write_text("ok\n")
    for f in tmp.rglob("*"):
        if f.is_file():
            with open(f, "rb") as handle:
                os.fsync(handle.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    if state.get("best"):
        (args.out / "best.json").write_text(json.dumps(state["best"]) + "\n")
    _rotate(args, state)
    _plot_curve(args.out, state)
    return final


def complete_checkpoints(out: Path) -> list[Path]:
    """The finished ``checkpoint-N`` folders of a run, oldest first."""
    found = [d for d in out.glob("checkpoint-*") if (d / "COMPLETE").exists()]
    return sorted((d for d in found if not d.name.endswith(".tmp")), key=_step_of)


def _step_of(folder: Path) -> int:
    return int(folder.name.split("-")[1])


def _rotate(args: SEPOArgs, state: dict) -> None:
    """Drop the oldest checkpoints beyond ``save_total_limit``; the best one always stays."""
    if not args.save_total_limit:
        return
    best = (state.get("best") or {}).get("step")
    others = [d for d in complete_checkpoints(args.out) if _step_of(d) != best]
    keep = max(args.save_total_limit - (best is not None), 1)
    for old in others[:-keep]:
        shutil.rmtree(old)


def resume(args: SEPOArgs, policy, optimizer) -> dict:
    """Load the newest complete checkpoint (warning about incomplete ones) or start fresh."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    fresh = {"step": 0, "log": [], "evals": [], "best": None, "below": args.adapter}
    complete = complete_checkpoints(args.out)
    for d in sorted(set(args.out.glob("checkpoint-*")) - set(complete)):
        warnings.warn(f"ignoring incomplete checkpoint {d}", stacklevel=2)
    if not complete:
        return fresh
    newest = complete[-1]
    saved = json.loads((newest / "trainer_state.json").read_text())
    if saved["fingerprint"] != args.fingerprint():
        drift = sorted(
            k for k in saved["fingerprint"] if saved["fingerprint"][k] != args.fingerprint().get(k)
        )
        raise ConfigDriftError(
            f"{args.out} was trained with other settings ({', '.join(drift)}); "
            "use a new --out folder"
        )
    set_peft_model_state_dict(policy, load_file(newest / "adapter" / "adapter_model.safetensors"))
    trainer = torch.load(newest / "trainer.pt", weights_only=True)
    optimizer.load_state_dict(trainer["optimizer"])
    torch.set_rng_state(trainer["torch_rng"])
    if trainer.get("cuda_rng"):
        torch.cuda.set_rng_state_all(trainer["cuda_rng"])
    saved.pop("fingerprint")
    return saved


def _plot_curve(out: Path, state: dict) -> None:
    if not state["evals"]:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [e["step"] for e in state["evals"]]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in ("safety_j", "pay", "exploit"):
        values = [e[key]["value"] for e in state["evals"]]
        errors = [e[key]["stderr"] for e in state["evals"]]
        ax.errorbar(steps, values, yerr=errors, label=key, marker="o", capsize=3)
    if "exact_exploitability" in state["evals"][0]:
        ax.plot(
            steps,
            [e["exact_exploitability"] for e in state["evals"]],
            marker="s",
            label="exact exploitability",
        )
    ax.set_xlabel("step")
    ax.legend()
    ax.set_title("SEPO checkpoints")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)
    plt.close(fig)
