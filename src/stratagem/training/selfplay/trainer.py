"""Filtered behaviour cloning by self-play for Deal or No Deal (SPEC §7; seed 002 §3, Alg. 1):
``stratagem train selfplay``.

Iteration 0 evaluates the starting policy (the base model, or ``--adapter``'s warm start). Then
each iteration n = 1 … N:

1. **Play** K games between two copies of the current policy. One ``LLMAgent`` object sits in
   both seats, so ``play`` sends the waiting turns of every live game as one batched generation
   per tick. Each decision samples with its own seed, so a game's text does not depend on which
   games share its batch (where the backend's numbers do not depend on it either). The games
   of an iteration's phases (self-play and partner games; the evaluation's self-play,
   fixed-agent and selection games) are played in one call (``play_groups``), so that one
   phase's games fill the batch while another's end.
2. **Filter** (``kept_seats``): a (game, seat) is kept when the seat's objective score
   ``R_i + λ·R_j`` is above the mean of the iteration's 2K seat scores; under λ = −1, where that
   mean is always 0, a seat of an agreement that scored exactly 0 is kept too (seed 002 §5.2).
   With ``--plays-per-context n`` (beyond the paper) each training context is played n times and
   a seat must beat the mean of its own context's seats instead. With ``--min-of-best F``
   (beyond the paper) a kept seat must also score at least F times the best any division of its
   context would give it (``near_best``): under λ = 1, a division at or near the joint-best
   one, not any agreement above a mean that failed games pull down.
   With ``--partner-games P`` (beyond the paper) the policy also plays P games against a
   rule-based agent (``--partner``, by default the fixed agent of step 4), and its seat of each
   that beats the mean of its seats there is kept as well
   (``kept_partner_seats``): self-play alone can teach a policy its own partner's habits.
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
   always scores 0 and the score against the fixed agent is used (``stop_on``). It is taken on
   the evaluation games themselves, unless ``--select-games M`` plays M more games each
   evaluation, on held-out contexts no evaluation game uses, only to choose: a checkpoint chosen
   on the games its row reports is chosen partly for their noise.

Resume is at iteration boundaries: ``checkpoint-N`` holds the adapter after iteration N and the
state, and a killed run restarts from the newest one. The games a killed iteration had finished
are read back from its trace file (``traces/iteration-N.jsonl``) instead of played again; they
are the games it would play (per-decision seeds). ``traces/kept-N.json`` lists the kept
(episode id, seat) pairs of iteration N. Iteration n's SFT is seeded by (seed, n), so a
resumed run trains exactly as an uninterrupted one.

Contexts: every valid context, or those of ``--contexts FILE`` (the original DoND format), split
once by a hash seeded by ``--seed`` (``split_contexts``): a tenth, each with its mirror, is held
out for the evaluation games and never drawn for a training game.

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
- rollouts record no token ids (the SFT tokenizes the chats' text, as
  ``trl_config.tokenize_chat`` does), which keeps trace files small.
"""

from __future__ import annotations

import json
import math
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from stratagem.agent import Agent
from stratagem.errors import ConfigError
from stratagem.game import Game
from stratagem.games.dond import DEFAULT_MAX_TURNS, Context, ContextSplit, split_contexts
from stratagem.play import EpisodeSpec
from stratagem.seeding import derive
from stratagem.trace import Trace
from stratagem.training.checkpoints import Checkpoints, NoOptimizer, TrainerState
from stratagem.training.memory import release_memory
from stratagem.training.policy import (
    disable_gradient_checkpointing,
    enable_gradient_checkpointing,
    load_policy,
)
from stratagem.training.rollouts import opponent as opponent_agent
from stratagem.training.selfplay.args import SelfPlayArgs, dond_game
from stratagem.training.selfplay.data import (
    kept_and_counts,
    play_groups,
    sft_rows,
    stalled,
)
from stratagem.training.selfplay.report import evaluation_row, headline, write_reports
from stratagem.training.trl_config import IGNORE, sft_config

Log = Callable[[str], None]


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


Phase = Literal["train", "partner", "selfplay", "fixed", "select"]
EVAL_STREAMS = {"selfplay": "selfplay-eval", "fixed": "selfplay-fixed", "select": "selfplay-select"}


def game_specs(
    phase: Phase,
    agent: Agent,
    opponent: Agent,
    args: SelfPlayArgs,
    iteration: int,
    split: ContextSplit | None = None,
) -> list[EpisodeSpec]:
    """The games of one phase of ``iteration``, in order.

    - ``train``: K self-play games on fresh training contexts, each context drawn for
      ``plays_per_context`` games in a row (each game its own seed);
    - ``partner``: ``partner_games`` games against ``opponent`` (the trainer passes the agent of
      ``--partner``) on fresh training contexts, the agent in seat k mod 2;
    - ``selfplay``: ``eval_games`` self-play games;
    - ``fixed``: ``eval_games`` games against ``opponent``, the agent in seat k mod 2;
    - ``select``: ``select_games`` games of the kind the selection follows (``fixed``'s under
      ``selects_on_fixed``, else ``selfplay``'s) on held-out contexts no evaluation game is
      played on (``selection_split``).

    Evaluation games draw held-out contexts, the same ones every iteration. ``split`` defaults
    to the split of ``args``' contexts."""
    split = split or split_contexts(dond_game(args).contexts, args.seed)
    if phase == "select":
        split = selection_split(split, args)
    specs = []
    counts = {"train": args.games, "partner": args.partner_games, "select": args.select_games}
    count = counts.get(phase, args.eval_games)
    training = phase in ("train", "partner")
    fixed = phase in ("fixed", "partner") or (phase == "select" and args.selects_on_fixed)
    for k in range(count):
        meta: dict[str, Any] = {"iteration": iteration, "phase": phase, "index": k}
        if phase == "train":
            seed = derive(args.seed, "selfplay", iteration, k)
        elif phase == "partner":
            seed = derive(args.seed, "selfplay-partner", iteration, k)
        else:
            seed = derive(args.seed, EVAL_STREAMS[phase], k)
        agents = (agent, agent)
        if fixed:
            meta["seat"] = k % 2
            agents = (agent, opponent) if k % 2 == 0 else (opponent, agent)
        draw_seed = seed
        if phase == "train" and args.plays_per_context > 1:
            group = k // args.plays_per_context
            draw_seed = derive(args.seed, "selfplay-context", iteration, group)
        context = split.draw(held_out=not training, seed=draw_seed)
        specs.append(EpisodeSpec(f"{iteration}/{phase}/{k}", seed, agents, meta, context))
    return specs


def evaluation_contexts(split: ContextSplit, args: SelfPlayArgs, phase: str) -> list[Context]:
    """The contexts ``game_specs`` draws for evaluation ``phase`` from ``split``, game by game."""
    count = args.select_games if phase == "select" else args.eval_games
    stream = EVAL_STREAMS[phase]
    return [split.draw(held_out=True, seed=derive(args.seed, stream, k)) for k in range(count)]


def selection_split(split: ContextSplit, args: SelfPlayArgs) -> ContextSplit:
    """``split`` without the evaluation games' contexts on its held-out side: the selection
    games' contexts, so that the checkpoint chosen is not chosen on the games reported.

    Raises:
        ConfigError: the evaluation games use every held-out context.
    """
    used = [c for phase in ("selfplay", "fixed") for c in evaluation_contexts(split, args, phase)]
    try:
        return split.without(used)
    except ConfigError as e:
        raise ConfigError(f"--select-games: {e}; lower --eval-games or add contexts") from None


def training_phases(args: SelfPlayArgs) -> list[Phase]:
    """The phases of an iteration's games, in the order they are listed and returned."""
    return ["train", "partner"] if args.partner_games else ["train"]


def evaluation_phases(args: SelfPlayArgs) -> list[Phase]:
    """The phases of an evaluation's games, in the order they are listed and returned."""
    return ["selfplay", "fixed", "select"] if args.select_games else ["selfplay", "fixed"]


# ---- the SFT ----


def fine_tune(
    policy: Any, tokenizer: Any, rows: list[dict[str, Any]], args: SelfPlayArgs, iteration: int
) -> dict[str, Any]:
    """One SFT job on ``rows`` (``input_ids`` / ``labels``) with TRL, training the policy's LoRA in
    place; returns its mean loss and step count. Seeded by (seed, iteration)."""
    import torch
    from datasets import Dataset
    from trl import SFTTrainer

    config = sft_config(
        args,
        output_dir=args.out / "sft",
        seed=derive(args.seed, "selfplay-sft", iteration) % 2**31,
        bf16=next(policy.parameters()).dtype == torch.bfloat16,
        # on request, set on the model here and taken off after the SFT: the Trainer's own flag
        # would leave it on through the next games
        gradient_checkpointing=False,
        save_strategy="no",
        eval_strategy="no",
        logging_steps=10,
    )
    trainer = SFTTrainer(
        model=policy,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    if args.gradient_checkpointing:
        enable_gradient_checkpointing(policy)
    try:
        result = trainer.train()
    finally:
        if args.gradient_checkpointing:
            disable_gradient_checkpointing(policy)
        policy.eval()
    return {"sft_loss": float(result.training_loss), "sft_steps": int(result.global_step)}


# ---- the loop ----


def train_selfplay(args: SelfPlayArgs, log: Log = print) -> Path:
    """Run (or resume) filtered-BC self-play; returns the run folder."""
    args.check()
    game = dond_game(args)
    split = split_contexts(game.contexts, args.seed)
    if args.select_games:  # refused before the model loads
        pool = len(selection_split(split, args).held_out)
        log(f"selection: {args.select_games} games per evaluation on {pool} held-out contexts")
    opponent = opponent_agent("dond", args.opponent)
    partner_agent = opponent_agent("dond", args.partner or args.opponent)
    policy, tokenizer = load_policy(args)
    runtime = {
        "iterations": args.iterations,
        "patience": args.patience,
        "max_live": args.max_live,
        "save_total_limit": args.save_total_limit,
        "gradient_checkpointing": args.gradient_checkpointing,
    }
    with Checkpoints(
        args.out, args.fingerprint(), keep=args.save_total_limit, runtime=runtime
    ) as ckpt:
        optimizer = NoOptimizer()
        state = ckpt.resume(policy, optimizer) or TrainerState(below=args.adapter)
        if state.step:
            log(f"resuming {args.out} after iteration {state.step}")
        folder = args.out / "traces"

        def games(phases: Sequence[Phase], agent: Agent, iteration: int) -> list[list[Trace]]:
            """Each phase's games, all played in one call (``play_groups``)."""
            groups = [
                game_specs(
                    p, agent, partner_agent if p == "partner" else opponent, args, iteration, split
                )
                for p in phases
            ]
            path = folder / f"iteration-{iteration}.jsonl"
            return play_groups(game, groups, [path] * len(groups), ckpt.run.key, args.max_live)

        def evaluate(iteration: int) -> None:
            selection = f", {args.select_games} to choose on" if args.select_games else ""
            log(
                f"iteration {iteration}: evaluating ({args.eval_games} games per opponent"
                f"{selection})"
            )
            start = time.perf_counter()
            agent = selfplay_agent(policy, tokenizer, game, args, iteration)
            selfplay, fixed, *selected = games(evaluation_phases(args), agent, iteration)
            select = next(iter(selected), None)
            row = evaluation_row(iteration, selfplay, fixed, select, not args.selects_on_fixed)
            del agent  # and with it the backend's prompt caches
            release_memory()
            row["eval_seconds"] = time.perf_counter() - start
            state.record_eval(row, args.selection)
            log(json.dumps({"iteration": iteration, **headline(row)}))
            ckpt.save(state, policy, optimizer)
            write_reports(args.out, state, args.opponent)

        if not state.evals:  # the starting policy, on the footing of every later iteration
            evaluate(0)
        status = "complete"
        for iteration in range(state.step + 1, args.iterations + 1):
            # a score over no game (all errored) improves on nothing
            cells = [e[args.selection] for e in state.evals]
            scores = [c["value"] if c.get("n") != 0 else -math.inf for c in cells]
            if stalled(scores, args.patience):
                log(
                    f"stopping early: {args.selection} has not beaten "
                    f"{max(scores[: -args.patience]):.3f} for {args.patience} iterations"
                )
                status = "stopped_early"
                break
            partners = (
                f" and {args.partner_games} with {partner_agent.name}" if args.partner_games else ""
            )
            log(f"iteration {iteration}: {args.games} self-play games{partners}")
            start = time.perf_counter()
            agent = selfplay_agent(policy, tokenizer, game, args, iteration - 1)
            traces, *partnered = games(training_phases(args), agent, iteration)
            partner = next(iter(partnered), [])
            del agent  # its prompt caches have no use in the fine-tuning
            release_memory()  # what the games freed, before the fine-tuning allocates
            played = time.perf_counter()
            kept, entry = kept_and_counts(traces, partner, args)
            kept_ids = [[t.episode_id, seat] for t, seat in kept]
            (folder / f"kept-{iteration}.json").write_text(json.dumps(kept_ids) + "\n")
            rows = sft_rows(tokenizer, kept, args.max_length)
            entry = {
                "iteration": iteration,
                **entry,
                "rows": len(rows),
                "trained_tokens": sum(sum(x != IGNORE for x in r["labels"]) for r in rows),
                "sft_loss": None,
                "sft_steps": 0,
            }
            if rows:
                entry.update(fine_tune(policy, tokenizer, rows, args, iteration))
                release_memory()
            else:
                log(f"iteration {iteration}: {_nothing_kept(args)}; the policy stays as it is")
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
        if args.contexts is not None:
            params += f" --param {shlex.quote(f'contexts={args.contexts}')}"
        log(
            f"best by {state.best.metric}: iteration {state.best.step} (evaluate with: stratagem "
            f"eval --game dond {params} --agent hf --adapter {stack})"
        )
    return args.out


def _nothing_kept(args: SelfPlayArgs) -> str:
    """Why an iteration kept no seat, in the words of its filter."""
    mean = "its context's mean" if args.plays_per_context > 1 else "the mean"
    if args.min_of_best:
        return f"no seat above {mean} and at {args.min_of_best:g} of its best or more"
    return f"no game above {mean}"
