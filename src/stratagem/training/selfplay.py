"""Filtered behaviour cloning by self-play for Deal or No Deal (SPEC §7; seed 002 §3, Alg. 1):
``stratagem train selfplay``.

Iteration 0 evaluates the starting policy (the base model, or ``--adapter``'s warm start). Then
each iteration n = 1 … N:

1. **Play** K games between two copies of the current policy. One ``LLMAgent`` object sits in
   both seats, so ``play`` sends the waiting turns of every live game as one batched generation
   per tick. Each decision samples with its own seed, so a game's text does not depend on which
   games share its batch.
2. **Filter** (``kept_seats``): a (game, seat) is kept when the seat's objective score
   ``R_i + λ·R_j`` is above the mean of the iteration's 2K seat scores; under λ = −1, where that
   mean is always 0, a seat of an agreement that scored exactly 0 is kept too (seed 002 §5.2).
3. **Fine-tune** the policy on the kept seats' chats with TRL's ``SFTTrainer``: the loss covers
   that seat's accepted answers only (``seat_tokens``). The other seat's turns and the game's
   corrections reach it as user turns; an answer the game refused stays in the context (the
   retry was conditioned on it) but carries no loss.
4. **Evaluate** the new policy: ``eval_games`` self-play games (both seats counted) and as many
   against a fixed rule-based agent (the policy alternating seats), on the same contexts every
   iteration; the ``metrics.dond`` row goes into the trainer state, ``curves.png`` and
   ``iterations.md``, and the iteration's checkpoint is written.
5. **Stop early** once the selection score has not beaten its best for ``patience`` iterations
   (``stalled``). The selection score is the self-play score, except under λ = −1, where self-play
   always scores 0 and the score against the fixed agent is used (``stop_on``).

Resume is at iteration boundaries: ``checkpoint-N`` holds the adapter after iteration N and the
state, and a killed run restarts from the newest one. The games a killed iteration had finished
are read back from its trace file (``traces/iteration-N.jsonl``) instead of played again; they
are the games it would play (per-decision seeds). ``traces/kept-N.json`` lists the kept
(episode id, seat) pairs of iteration N. Iteration n's SFT is seeded by (seed, n), so a
resumed run trains exactly as an uninterrupted one.

Departures from the paper, on purpose:

- one LoRA adapter continued across iterations: the paper fine-tunes its latest model every
  round, and base + adapter *is* that model. Each iteration is its own SFT job with a fresh
  optimiser and cosine schedule, as a new fine-tuning job would be, so a checkpoint carries no
  optimiser state; ``checkpoint-N/adapter`` is the whole policy on top of ``--adapter``;
- the paper's curves are its training games' scores; here every iteration's policy is evaluated
  on held-out contexts, the same ones each iteration (less noise between iterations), and also
  against a fixed agent (the paper compares λ = −1 models with GPT-4; we use a rule-based
  negotiator, ``FairSplit`` by default);
- the paper leaves its early-stopping criterion open; ours is patience on the selection score;
- SFT settings: the paper's fine-tuning API ran 3 epochs at batch size 1 with a raised learning
  rate; LoRA here runs 3 epochs at batch 8 and lr 1e-4 (rank 16, α 32, attention projections);
- rollouts record no token ids (the SFT tokenizes the chats' text as ``sft.tokenize_chat`` does),
  which keeps trace files small.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from stratagem.agent import Agent
from stratagem.backends.embedded import EMBEDDED
from stratagem.errors import ConfigError
from stratagem.game import Game, Seat
from stratagem.games.dond import DEFAULT_MAX_TURNS
from stratagem.metrics.dond import accepted, complete, dond_metrics
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.trace import Trace, TraceWriter, read_traces
from stratagem.training.checkpoints import Checkpoints, TrainerState
from stratagem.training.sft import IGNORE, tokenize_chat

Log = Callable[[str], None]


@dataclass
class SelfPlayArgs:
    """Hyperparameters of ``stratagem train selfplay`` (defaults: seed 002 §3 where it gives
    them)."""

    model: str = EMBEDDED
    """``embedded`` (SmolLM2-135M-Instruct), a Hugging Face id or a local folder."""
    adapter: str | None = None
    """Start from this LoRA adapter (a warm-start SFT run; several, comma-separated, stack): it is
    merged into the weights and self-play trains a fresh LoRA on top."""
    out: Path = Path("runs/selfplay")
    """The run folder: checkpoints, traces per iteration, best.json, curves.png, iterations.md."""
    lam: float = 0.0
    """λ of the objective R_i + λ·R_j: 0 semi-competitive, 1 cooperative, -1 zero-sum."""
    max_turns: int = DEFAULT_MAX_TURNS
    """Accepted turns before messages close and both seats must propose."""
    iterations: int = 10
    """N, the most self-play iterations (a resumed run may be given more)."""
    games: int = 500
    """K, self-play games per iteration."""
    patience: int = 2
    """Stop once the selection score has not beaten its best for this many iterations (0: never
    stop early)."""
    stop_on: Literal["auto", "selfplay", "fixed"] = "auto"
    """The selection score of early stopping and best.json: the self-play score, the score against
    the fixed agent, or auto (self-play, except under λ = -1, where self-play always scores 0)."""
    opponent: str = "FairSplit"
    """The fixed rule-based agent each iteration is also evaluated against."""
    eval_games: int = 100
    """Games per evaluation, in self-play and against the fixed agent each."""
    temperature: float = 1.0
    """Sampling temperature of every game (seed 002: 1); 0 is greedy."""
    max_new_tokens: int = 128
    """Generated tokens per answer at most."""
    max_live: int = 64
    """Games in flight, hence the most turns one batched generation holds."""
    lora_rank: int = 16
    """Rank of the self-play LoRA (attention projections)."""
    lora_alpha: int = 32
    """LoRA α."""
    lora_dropout: float = 0.05
    """LoRA dropout (active in the SFT, not in the games)."""
    learning_rate: float = 1e-4
    """Peak learning rate of each iteration's SFT (cosine schedule)."""
    epochs: float = 3.0
    """Passes over an iteration's kept chats (seed 002: 3)."""
    warmup_ratio: float = 0.05
    """Share of an iteration's SFT steps spent warming the schedule up."""
    batch_size: int = 8
    """Chats per SFT step."""
    grad_accum: int = 1
    """SFT steps of gradient accumulation per optimiser step."""
    max_length: int = 2048
    """Tokens per chat at most in the SFT (longer chats are cut at the end)."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints (the newest ones, plus always the best); None: all."""
    seed: int = 42
    """Seeds every game, the LoRA initialisation and every iteration's SFT."""

    def check(self) -> None:
        """Refuse, before any model loads, settings the trainer cannot run.

        Raises:
            ConfigError: naming the option and the value it needs.
            UnknownNameError: the fixed opponent is not a DoND strategy.
        """
        from stratagem.strategies import get_strategy

        for name, least in (
            ("iterations", 0),
            ("games", 1),
            ("patience", 0),
            ("eval_games", 1),
            ("max_new_tokens", 1),
            ("max_live", 1),
            ("max_turns", 1),
            ("batch_size", 1),
            ("grad_accum", 1),
            ("max_length", 1),
            ("lora_rank", 1),
        ):
            value = getattr(self, name)
            if value < least:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} must be at least {least}, got {value}")
        if not -1.0 <= self.lam <= 1.0:
            raise ConfigError(f"--lam must be in [-1, 1], got {self.lam}")
        if self.temperature < 0:
            raise ConfigError(f"--temperature must be at least 0, got {self.temperature}")
        if self.epochs <= 0 or self.learning_rate <= 0:
            raise ConfigError("--epochs and --learning-rate must be above 0")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        if self.stop_on == "selfplay" and self.lam == -1 and self.patience:
            raise ConfigError(
                "under --lam -1 every self-play game scores 0 in all: use --stop-on fixed "
                "(or auto), or --patience 0"
            )
        get_strategy("dond", self.opponent)  # UnknownNameError, with a "did you mean"
        for folder in (self.adapter or "").split(","):
            if folder and not Path(folder).is_dir():
                raise ConfigError(f"--adapter {folder}: no such adapter folder")

    def fingerprint(self) -> dict[str, Any]:
        """The settings that identify a run, as JSON values: ``iterations`` and ``patience`` are
        left out (a run may be extended), as are ``max_live`` and ``save_total_limit`` (batching
        and disk policy, not results)."""
        d = asdict(self)
        for runtime in ("iterations", "patience", "max_live", "save_total_limit"):
            d.pop(runtime)
        d["out"] = str(d["out"])
        return d

    @property
    def selection(self) -> str:
        """The evaluation row key early stopping and best.json follow."""
        fixed = self.stop_on == "fixed" or (self.stop_on == "auto" and self.lam == -1)
        return "fixed_score" if fixed else "selfplay_score"


# ---- games ----


def selfplay_agent(policy, tokenizer, game: Game, args: SelfPlayArgs, iteration: int) -> Agent:
    """The agent of ``iteration``'s games: the policy sampling at the temperature, on a fresh
    backend (no KV cache of earlier weights)."""
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend

    policy.eval()
    backend = HFBackend.from_model(
        policy,
        tokenizer,
        model_id=f"selfplay:{args.model}@{iteration}",
        max_batch=args.max_live,
        prefix_reuse=True,
    )
    backend.return_ids = False  # the SFT reads the chats' text; ids would bloat the traces
    sampling = Sampling(args.temperature, 1.0, args.max_new_tokens)
    return LLMAgent(backend, game, sampling)


def game_specs(
    phase: Literal["train", "selfplay", "fixed"],
    agent: Agent,
    opponent: Agent,
    args: SelfPlayArgs,
    iteration: int,
) -> list[EpisodeSpec]:
    """The games of one phase of ``iteration``: ``train`` — K self-play games on fresh contexts;
    ``selfplay`` — ``eval_games`` self-play games; ``fixed`` — ``eval_games`` games against
    ``opponent``, the agent in seat k mod 2. Evaluation games draw the same contexts every
    iteration."""
    specs = []
    count = args.games if phase == "train" else args.eval_games
    for k in range(count):
        meta: dict[str, Any] = {"iteration": iteration, "phase": phase, "index": k}
        if phase == "train":
            seed = derive(args.seed, "selfplay", iteration, k)
            agents = (agent, agent)
        elif phase == "selfplay":
            seed = derive(args.seed, "selfplay-eval", k)
            agents = (agent, agent)
        else:
            seed = derive(args.seed, "selfplay-fixed", k)
            meta["seat"] = k % 2
            agents = (agent, opponent) if k % 2 == 0 else (opponent, agent)
        specs.append(EpisodeSpec(f"{iteration}/{phase}/{k}", seed, agents, meta))
    return specs


def play_games(game: Game, specs: Sequence[EpisodeSpec], path: Path, key: str, max_live: int):
    """Plays the ``specs`` not yet in the trace file ``path`` (appending each as it ends) and
    returns the traces of all of them, in spec order. Episode ids get the run's ``key``."""
    keyed = [dataclasses.replace(s, episode_id=f"{key}/{s.episode_id}") for s in specs]
    with TraceWriter(path) as writer:
        for trace in play(game, keyed, max_live=max_live, skip=writer.done, on_error="record"):
            writer.write(trace)
    wanted = {s.episode_id for s in keyed}
    found = {t.episode_id: t for t in read_traces(path) if t.episode_id in wanted}
    return [found[s.episode_id] for s in keyed if s.episode_id in found]


# ---- the kept set and its loss masks ----


def kept_seats(traces: Sequence[Trace], lam: float) -> list[tuple[Trace, Seat]]:
    """Every (game, seat) whose objective score is above the mean of all seat scores of the
    complete games, in game order; under λ = −1 also each seat of an agreement scoring exactly 0.

    Games that ended in an error (not aborts: those score 0 and count) are left out.
    """
    games = complete(traces)
    scored = [(t, seat, t.rounds[-1].payoffs[seat]) for t in games for seat in (0, 1)]
    if not scored:
        return []
    mean = math.fsum(x for _, _, x in scored) / len(scored)
    return [
        (t, seat)
        for t, seat, x in scored
        if x > mean or (lam == -1 and x == 0 and t.rounds[-1].info["agreement"])
    ]


def seat_chat(trace: Trace, seat: Seat) -> tuple[list[dict[str, str]], list[bool]]:
    """The chat ``seat`` held in ``trace`` — its system turn, then per answer the user turn it
    answered (what was new, or a correction) and its answer — and, per answer, whether the game
    accepted it.

    Raises:
        ValueError: the seat was not a model (its trace holds no system turn or no answer text).
    """
    system = trace.system[seat]
    if system is None:
        raise ValueError(f"{trace.episode_id}: seat {seat} was not played by a model")
    messages = [{"role": "system", "content": system}]
    trained = []
    for decision, ok in zip(trace.decisions, accepted(trace), strict=True):
        if decision.seat != seat:
            continue
        if decision.text is None or decision.prompt is None:
            raise ValueError(f"{trace.episode_id}: seat {seat} has an answer without its text")
        messages.append({"role": "user", "content": decision.prompt})
        messages.append({"role": "assistant", "content": decision.text})
        trained.append(ok)
    return messages, trained


def label_runs(labels: Sequence[int]) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of consecutive labels other than ``IGNORE``."""
    runs = []
    start = None
    for i, label in enumerate([*labels, IGNORE]):
        if label != IGNORE and start is None:
            start = i
        elif label == IGNORE and start is not None:
            runs.append((start, i))
            start = None
    return runs


def seat_tokens(
    tokenizer, messages: list[dict[str, str]], trained: Sequence[bool], max_length: int
) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` of a chat with the loss on the assistant turns marked in
    ``trained`` only, cut to ``max_length``.

    ``sft.tokenize_chat`` labels every assistant turn as one run of tokens (its text and the
    end-of-turn tokens), and user turns separate those runs; the runs of the untrained turns are
    set to ``IGNORE``. Naive equivalent: tokenize the rendered chat and mask by each turn's
    character offsets; the tests check that the labelled tokens decode to the trained answers.

    Raises:
        ValueError: the labelled runs do not match the assistant turns one to one (an empty
            answer under a template that renders nothing for it).
    """
    full = tokenize_chat(tokenizer, messages, max_length=sys.maxsize)
    labels = list(full["labels"])
    runs = label_runs(labels)
    if len(runs) != len(trained):
        raise ValueError(f"{len(runs)} labelled runs for {len(trained)} assistant turns")
    for (start, end), keep in zip(runs, trained, strict=True):
        if not keep:
            labels[start:end] = [IGNORE] * (end - start)
    return {"input_ids": full["input_ids"][:max_length], "labels": labels[:max_length]}


def sft_rows(tokenizer, kept: Sequence[tuple[Trace, Seat]], max_length: int) -> list[dict]:
    """One tokenized row per kept seat whose chat has an accepted answer within ``max_length``."""
    rows = []
    for trace, seat in kept:
        row = seat_tokens(tokenizer, *seat_chat(trace, seat), max_length)
        if any(label != IGNORE for label in row["labels"]):
            rows.append(row)
    return rows


# ---- the SFT ----


class NoOptimizer:
    """Stands in for the optimiser in checkpoints: every iteration's SFT starts a fresh one, so no
    optimiser state crosses an iteration boundary."""

    def state_dict(self) -> dict:
        """Nothing to save."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Nothing to restore."""


def fine_tune(policy, tokenizer, rows: list[dict], args: SelfPlayArgs, iteration: int) -> dict:
    """One SFT job on ``rows`` (``input_ids`` / ``labels``) with TRL, training the policy's LoRA in
    place; returns its mean loss and step count. Seeded by (seed, iteration)."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    bf16 = next(policy.parameters()).dtype == torch.bfloat16
    config = SFTConfig(
        output_dir=str(args.out / "sft"),
        learning_rate=args.learning_rate,
        num_train_epochs=args.epochs,
        lr_scheduler_type="cosine",
        warmup_steps=args.warmup_ratio,  # a float below 1 is a ratio of the total steps
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length,
        gradient_checkpointing=False,  # it would turn the model's KV cache off for the games
        save_strategy="no",
        eval_strategy="no",
        logging_steps=10,
        report_to=[],
        seed=derive(args.seed, "selfplay-sft", iteration) % 2**31,
        bf16=bf16,
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = SFTTrainer(
        model=policy,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    result = trainer.train()
    policy.eval()
    return {"sft_loss": float(result.training_loss), "sft_steps": int(result.global_step)}


# ---- evaluation, early stopping, reports ----


def evaluation_row(iteration: int, selfplay: list[Trace], fixed: list[Trace]) -> dict[str, Any]:
    """The state's evaluation row of ``iteration``: every ``metrics.dond`` metric of the
    self-play games (both seats counted), prefixed ``selfplay_``, and of the games against the
    fixed agent (the policy's seat), prefixed ``fixed_``."""
    row: dict[str, Any] = {"step": iteration}
    for prefix, traces, both in (("selfplay", selfplay, True), ("fixed", fixed, False)):
        for name, e in dond_metrics(traces, both_seats=both).items():
            row[f"{prefix}_{name}"] = {"value": e.value, "stderr": e.stderr, "n": e.n}
        row[f"{prefix}_errors"] = sum(t.status != "complete" for t in traces)
    return row


def stalled(values: Sequence[float], patience: int) -> bool:
    """Whether the last ``patience`` values brought nothing above the best value before them
    (never with ``patience`` 0, or before there are ``patience`` + 1 values)."""
    if patience < 1 or len(values) <= patience:
        return False
    return max(values[-patience:]) <= max(values[:-patience])


# (metric, title) of each panel of curves.png
CURVES = (
    ("score", "objective score"),
    ("agreement_rate", "agreement rate"),
    ("pareto_rate", "Pareto-optimal rate"),
    ("dialogue_words", "dialogue length (words)"),
    ("vocabulary_size", "vocabulary (distinct words)"),
)


def write_reports(out: Path, state: TrainerState, opponent: str) -> None:
    """``iterations.md`` (one row per iteration) and ``curves.png`` (score, agreement, Pareto
    rate, length and vocabulary per iteration, in self-play and against the fixed agent, ± one
    standard error)."""
    if not state.evals:
        return
    (out / "iterations.md").write_text(iterations_markdown(state, opponent))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    iterations = [e["step"] for e in state.evals]
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.6))
    for ax, (key, title) in zip(axes, CURVES, strict=True):
        for prefix, label in (("selfplay", "self-play"), ("fixed", f"vs {opponent}")):
            cells = [e[f"{prefix}_{key}"] for e in state.evals]
            ax.errorbar(
                iterations,
                [c["value"] for c in cells],
                yerr=[c["stderr"] for c in cells],
                label=label,
                marker="o",
                capsize=3,
            )
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)
    plt.close(fig)


def iterations_markdown(state: TrainerState, opponent: str) -> str:
    """The iterations table: the evaluation of each iteration's policy, and the kept share and
    SFT loss of the training games that led to it."""
    trained = {e["iteration"]: e for e in state.log}

    def cell(row: dict, key: str, digits: int = 2) -> str:
        c = row[key]
        return f"{c['value']:.{digits}f} ± {c['stderr']:.{digits}f}"

    head = (
        "| iteration | self-play score | agreement | Pareto | tokens / game | vocabulary "
        f"| vs {opponent}: score | agreement | Pareto | kept / seats | SFT loss |"
    )
    lines = [head, "|" + " ---: |" * 11]
    for row in state.evals:
        n = row["step"]
        log = trained.get(n)
        kept = f"{log['kept']} / {log['seats']}" if log else "—"
        loss = f"{log['sft_loss']:.3f}" if log and log.get("sft_loss") is not None else "—"
        lines.append(
            f"| {n} | {cell(row, 'selfplay_score')} | {cell(row, 'selfplay_agreement_rate')} "
            f"| {cell(row, 'selfplay_pareto_rate')} | {cell(row, 'selfplay_dialogue_tokens', 0)} "
            f"| {row['selfplay_vocabulary_size']['value']:.0f} "
            f"| {cell(row, 'fixed_score')} | {cell(row, 'fixed_agreement_rate')} "
            f"| {cell(row, 'fixed_pareto_rate')} | {kept} | {loss} |"
        )
    return "\n".join(lines) + "\n"


# ---- the loop ----


def train_selfplay(args: SelfPlayArgs, log: Log = print) -> Path:
    """Run (or resume) filtered-BC self-play; returns the run folder."""
    from stratagem.games import get_game
    from stratagem.strategies import get_strategy
    from stratagem.training.sepo import load_policy

    args.check()
    game = get_game("dond", lam=args.lam, max_turns=args.max_turns)
    opponent = get_strategy("dond", args.opponent)
    # load_policy reads model, adapter, lora_* and seed, which these args share with SEPO's
    policy, tokenizer = load_policy(args)  # type: ignore[arg-type]
    runtime = {
        "iterations": args.iterations,
        "patience": args.patience,
        "max_live": args.max_live,
        "save_total_limit": args.save_total_limit,
    }
    with Checkpoints(
        args.out, args.fingerprint(), keep=args.save_total_limit, runtime=runtime
    ) as ckpt:
        optimizer = NoOptimizer()
        state = ckpt.resume(policy, optimizer) or TrainerState(below=args.adapter)
        if state.step:
            log(f"resuming {args.out} after iteration {state.step}")
        folder = args.out / "traces"

        def games(phase, agent, iteration) -> list[Trace]:
            specs = game_specs(phase, agent, opponent, args, iteration)
            path = folder / f"iteration-{iteration}.jsonl"
            return play_games(game, specs, path, ckpt.run.key, args.max_live)

        def evaluate(iteration: int) -> None:
            log(f"iteration {iteration}: evaluating ({args.eval_games} games per opponent)")
            start = time.perf_counter()
            agent = selfplay_agent(policy, tokenizer, game, args, iteration)
            row = evaluation_row(
                iteration, games("selfplay", agent, iteration), games("fixed", agent, iteration)
            )
            row["eval_seconds"] = time.perf_counter() - start
            state.record_eval(row, args.selection)
            log(json.dumps({"iteration": iteration, **_headline(row)}))
            ckpt.save(state, policy, optimizer)
            write_reports(args.out, state, args.opponent)

        if not state.evals:  # the starting policy, on the footing of every later iteration
            evaluate(0)
        status = "complete"
        for iteration in range(state.step + 1, args.iterations + 1):
            scores = [e[args.selection]["value"] for e in state.evals]
            if stalled(scores, args.patience):
                log(
                    f"stopping early: {args.selection} has not beaten "
                    f"{max(scores[: -args.patience]):.3f} for {args.patience} iterations"
                )
                status = "stopped_early"
                break
            log(f"iteration {iteration}: {args.games} self-play games")
            start = time.perf_counter()
            agent = selfplay_agent(policy, tokenizer, game, args, iteration - 1)
            traces = games("train", agent, iteration)
            played = time.perf_counter()
            finished = complete(traces)
            kept = kept_seats(traces, args.lam)
            kept_ids = [[t.episode_id, seat] for t, seat in kept]
            (folder / f"kept-{iteration}.json").write_text(json.dumps(kept_ids) + "\n")
            rows = sft_rows(tokenizer, kept, args.max_length)
            entry: dict[str, Any] = {
                "iteration": iteration,
                "games": len(traces),
                "seats": 2 * len(finished),
                "mean_score": _mean([t.rounds[-1].payoffs[s] for t in finished for s in (0, 1)]),
                "agreement_rate": _mean([float(t.rounds[-1].info["agreement"]) for t in finished]),
                "kept": len(kept),
                "rows": len(rows),
                "trained_tokens": sum(sum(x != IGNORE for x in r["labels"]) for r in rows),
                "sft_loss": None,
                "sft_steps": 0,
            }
            if rows:
                entry.update(fine_tune(policy, tokenizer, rows, args, iteration))
            else:
                log(f"iteration {iteration}: no game above the mean; the policy stays as it is")
            entry["play_seconds"] = played - start
            entry["sft_seconds"] = time.perf_counter() - played
            state.log.append(entry)
            log(json.dumps(entry))
            state.step = iteration
            evaluate(iteration)
        ckpt.run.finish(status, iterations=state.step)
    if state.best is not None:
        stack = ",".join(filter(None, [state.best.below, str(args.out / state.best.adapter)]))
        params = f"--param lam={args.lam:g}"
        if args.max_turns != DEFAULT_MAX_TURNS:
            params += f" --param max_turns={args.max_turns}"
        log(
            f"best by {state.best.metric}: iteration {state.best.step} (evaluate with: stratagem "
            f"eval --game dond {params} --agent hf --adapter {stack})"
        )
    return args.out


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _headline(row: dict) -> dict[str, float]:
    keys = ("score", "agreement_rate", "pareto_rate", "dialogue_words", "vocabulary_size")
    return {
        f"{prefix}_{k}": round(row[f"{prefix}_{k}"]["value"], 4)
        for prefix in ("selfplay", "fixed")
        for k in keys
    }
