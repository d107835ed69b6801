"""Evaluate a self-play run's checkpoints again, on more held-out games (``stratagem
selfplay-eval``).

A run evaluates every iteration on ``--eval-games`` games per opponent; on a CPU that is a few
dozen, and a row's standard error is then as large as the change between iterations. This
replays the trainer's own evaluation phases (``selfplay.game_specs``: the same held-out
contexts, per-game seeds and seats) for the policy saved at each chosen checkpoint, with
``games`` games per phase. Games ``0 .. eval_games - 1`` of a phase are the run's own evaluation
games, copied from its traces (a reloaded checkpoint plays them token for token as the run did:
every decision samples with its own seed, whatever else is in the batch); the rest are played.
For a run that chose its checkpoints on selection games (``--select-games``), only the games
whose context is a selection game's context (or its mirror) are drawn again, by their own seed,
off those contexts (``off_selection``; marked ``meta["redrawn"]``), so that a checkpoint is not
evaluated again on the contexts it was chosen on; every other game is the game a run without
``--select-games`` plays, so that such a run and its start (or another run from the same seed)
stay paired on all games but those. How many were drawn again is logged and written.

Besides every ``metrics.dond`` metric per checkpoint, it reports *paired* changes from the first
checkpoint named, over the same games (``selfplay.pairing``, on ``metrics.paired``; each checks
first, by seed and context, that both sides played the same games, and refuses otherwise): the
score's (the self-play objective averaged over both seats, or the policy's score against the
fixed agent) as mean ± standard error with a 95 % paired bootstrap interval, which cancels the
spread between contexts that an unpaired comparison carries; the joint-best and agreement
rates' with the exact McNemar test of their discordant games.

With ``opponent`` (another rule-based agent than the run's), the ``fixed`` phase plays the
same games — contexts, seeds, seats — against that agent instead, all of them played: a partner
the run never trained with (``train selfplay --partner-games`` trains with its own). Its games
and rows go under the phase name ``fixed-<opponent>``.

A checkpoint's phases are played in one call (``selfplay.data.play_groups``: one phase's games
fill the batch while another's end), each into its own file.

Writes ``RUN/evaluation-<games>/``: ``<phase>/iteration-K.jsonl`` (every game), ``summary.json``
and ``summary.md`` (of the checkpoints and phases named in this call: naming again those of an
earlier call reads their games back instead of playing them). A rerun skips the games already
written and plays again those that errored; a written game on another context or seed than
this evaluation draws (a folder written before the later games were drawn as now) is refused,
naming the file and the game.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from stratagem.errors import ConfigError
from stratagem.games.dond.contexts import context_id
from stratagem.metrics.dond import complete, dond_metrics
from stratagem.runs import read_fingerprint
from stratagem.trace import Trace, read_traces, write_traces
from stratagem.training.selfplay.args import SelfPlayArgs, dond_game
from stratagem.training.selfplay.pairing import (
    CheckpointEvaluation,
    paired_changes,
    summary_markdown,
)

if TYPE_CHECKING:
    from stratagem.agent import Agent
    from stratagem.games.dond import ContextSplit
    from stratagem.play import EpisodeSpec

PHASES = ("selfplay", "fixed")


def run_settings(run: Path, games: int) -> SelfPlayArgs:
    """The settings a self-play run was made with (its ``run.json``), with ``eval_games`` set to
    ``games``.

    Raises:
        ConfigError: the folder is not a self-play run, its starting adapter is gone, or its
            context file is gone or changed since.
    """
    stored = read_fingerprint(run)
    names = {f.name for f in fields(SelfPlayArgs)}
    if not {"lam", "max_turns", "games", "eval_games", "opponent"} <= set(stored):
        raise ConfigError(f"{run} is not a run of `stratagem train selfplay`")
    values = {k: v for k, v in stored.items() if k in names}
    values.update(out=run, eval_games=games)
    if values.get("contexts") is not None:
        values["contexts"] = Path(values["contexts"])
    args = SelfPlayArgs(**values)
    if args.contexts is not None and not args.contexts.is_file():
        raise ConfigError(f"{run} played on {args.contexts}, which is gone")
    args.check()  # e.g. a starting adapter moved away since
    if args.contexts is not None:
        if dond_game(args).params["contexts_sha256"] != stored.get("contexts_sha256"):
            raise ConfigError(f"{args.contexts} changed since {run} played on it")
    return args


def off_selection(
    specs: list[EpisodeSpec], split: ContextSplit, args: SelfPlayArgs, own: int
) -> list[EpisodeSpec]:
    """``specs`` (one evaluation phase of ``args``, a run that chose on selection games and
    played ``own`` evaluation games a phase) with the games whose context is one of the run's
    selection contexts, or a mirror of one, drawn again by their own seed off those
    (``ContextSplit.draw_avoiding``) and marked ``meta["redrawn"]``; every other game as it was.

    The run's own games are never drawn again: its selection contexts are drawn off theirs.
    """
    from stratagem.training.selfplay.trainer import evaluation_contexts, selection_split

    selection = selection_split(split, replace(args, eval_games=own))
    avoid = set(evaluation_contexts(selection, args, "select"))
    out = []
    for s in specs:
        context, redrawn = split.draw_avoiding(avoid, s.seed)
        out.append(replace(s, scenario=context, meta={**s.meta, "redrawn": True}) if redrawn else s)
    return out


def redrawn_count(specs: Sequence[EpisodeSpec]) -> int:
    """How many of ``specs`` ``off_selection`` drew again."""
    return sum(1 for s in specs if s.meta.get("redrawn"))


def check_written(path: Path, specs: Sequence[EpisodeSpec]) -> None:
    """Checks that every complete game already in ``path`` (games a rerun skips) is the game
    ``specs`` lists at its index: the same seed and context.

    Raises:
        ConfigError: the first that is not, naming the file, and both games' seed and context.
    """
    if not path.exists():
        return
    wanted = {s.meta["index"]: (s.seed, context_id(s.scenario)) for s in specs}
    for t in complete(read_traces(path)):
        k = t.meta.get("index")
        if k in wanted and (t.seed, context_id(t.scenario)) != wanted[k]:
            seed, context = wanted[k]
            raise ConfigError(
                f"{path}: game {k} was played with seed {t.seed} on context "
                f"{context_id(t.scenario)}, but this evaluation draws seed {seed} on {context} "
                "(written before selfplay-eval drew a run's later games as now?); move the "
                "evaluation folder away and evaluate again"
            )


def checkpoint_folder(run: Path, checkpoint: int) -> Path:
    """The saved policy of ``checkpoint`` (iteration ``checkpoint``'s LoRA; 0 is the start).

    Raises:
        ConfigError: no complete checkpoint of that number, naming those there are.
    """
    folder = run / f"checkpoint-{checkpoint}"
    if not (folder / "COMPLETE").exists():
        there = sorted(
            int(p.name.split("-")[1])
            for p in run.glob("checkpoint-*")
            if (p / "COMPLETE").exists() and p.name.split("-")[1].isdigit()
        )
        raise ConfigError(
            f"{run} has no complete checkpoint-{checkpoint} "
            f"(complete: {', '.join(map(str, there)) or 'none'})"
        )
    return folder


def seed_from_run(run: Path, checkpoint: int, phase: str, target: Path) -> int:
    """Start ``target`` with the run's own evaluation games of ``phase`` at ``checkpoint``
    (nothing when ``target`` exists already); returns how many were copied."""
    if target.exists():
        return 0
    source = run / "traces" / f"iteration-{checkpoint}.jsonl"
    own = (
        [t for t in read_traces(source) if t.meta.get("phase") == phase] if source.exists() else []
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")  # a kill mid-copy leaves no half file behind
    write_traces(partial, own)
    os.replace(partial, target)
    return len(own)


def evaluate_checkpoints(
    run: Path,
    checkpoints: Sequence[int],
    games: int,
    phases: Sequence[str] = PHASES,
    log: Callable[[str], None] = print,
    opponent: str | None = None,
) -> list[CheckpointEvaluation]:
    """Play (or read back) ``games`` evaluation games per phase for each checkpoint of ``run``
    and write ``summary.json`` / ``summary.md``; see the module docstring.

    Raises:
        ConfigError: bad games, checkpoints or phases, or a run that cannot be replayed.
        UnknownNameError: ``opponent`` is not a DoND strategy.
    """
    from stratagem.games.dond import split_contexts
    from stratagem.training.rollouts import opponent as opponent_agent

    phases = _checked_request(checkpoints, games, phases)
    run = Path(run)
    args = run_settings(run, games)
    fixed = opponent_agent("dond", opponent or args.opponent)  # an unknown name: before loading
    names = _phase_names(fixed.name if opponent not in (None, args.opponent) else None)
    folders = {k: checkpoint_folder(run, k) for k in checkpoints}
    # the model libraries load only once the request and the run folder are known to be good
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    from stratagem.training.memory import release_memory
    from stratagem.training.policy import load_policy
    from stratagem.training.selfplay.data import play_groups
    from stratagem.training.selfplay.trainer import selfplay_agent

    key = json.loads((run / "run.json").read_text(encoding="utf-8"))["key"]
    out = run / f"evaluation-{games}"
    game = dond_game(args)
    split = split_contexts(game.contexts, args.seed)
    own = int(read_fingerprint(run)["eval_games"])  # the run's own games per phase
    policy, tokenizer = load_policy(args)
    played: dict[tuple[int, str], list[Trace]] = {}
    redrawn: dict[str, int] = {}
    for k, folder in folders.items():
        weights = load_file(str(folder / "adapter" / "adapter_model.safetensors"))
        set_peft_model_state_dict(policy, weights)
        agent = selfplay_agent(policy, tokenizer, game, args, k)
        groups, paths = [], []
        for phase in phases:
            path = out / names[phase] / f"iteration-{k}.jsonl"
            copied = seed_from_run(run, k, phase, path) if names[phase] == phase else 0
            specs = _phase_specs(phase, agent, fixed, args, k, split, own)
            check_written(path, specs)
            redrawn[phase] = redrawn_count(specs)
            log(
                f"checkpoint {k}: {games} {names[phase]} games ({copied} of them the run's own, "
                f"{redrawn[phase]} re-drawn off its selection contexts)"
            )
            groups.append(specs)
            paths.append(path)
        # the phases share the batch, as in the trainer's own evaluation
        for phase, traces in zip(
            phases, play_groups(game, groups, paths, key, args.max_live), strict=True
        ):
            played[k, phase] = traces
        del agent  # and with it the backend's prompt caches
        release_memory()
    results = _evaluations(played, checkpoints, phases, names, redrawn)
    _write_summary(out, results, games)
    return results


def _checked_request(checkpoints: Sequence[int], games: int, phases: Sequence[str]) -> list[str]:
    """Returns ``phases`` without repeats (a phase named twice is played once); raises
    ``ConfigError`` on fewer than one game, no checkpoint or an unknown phase."""
    if games < 1:
        raise ConfigError("--games: play at least one game per phase")
    if not checkpoints:
        raise ConfigError("--checkpoints: name at least one checkpoint")
    if unknown := [p for p in phases if p not in PHASES]:
        raise ConfigError(f"--phases: {', '.join(unknown)}; choose from {', '.join(PHASES)}")
    return list(dict.fromkeys(phases))


def _phase_names(other: str | None) -> dict[str, str]:
    """The name each phase's games and rows go under: its own, except ``fixed-<other>`` for
    the ``fixed`` phase played against ``other`` instead of the run's fixed agent."""
    return {"selfplay": "selfplay", "fixed": "fixed" if other is None else f"fixed-{other}"}


def _phase_specs(
    phase: str,
    agent: Agent,
    fixed: Agent,
    args: SelfPlayArgs,
    checkpoint: int,
    split: ContextSplit,
    own: int,
) -> list[EpisodeSpec]:
    """The games of ``phase`` for ``checkpoint``: the trainer's own evaluation games
    (``game_specs``), those past the run's ``own`` drawn off the selection games' contexts for
    a run that chose on selection games (``off_selection``)."""
    from stratagem.training.selfplay.trainer import game_specs

    specs = game_specs(phase, agent, fixed, args, checkpoint, split)  # type: ignore[arg-type]
    if args.select_games:
        specs = off_selection(specs, split, args, own)
    return specs


def _evaluations(
    played: dict[tuple[int, str], list[Trace]],
    checkpoints: Sequence[int],
    phases: Sequence[str],
    names: dict[str, str],
    redrawn: dict[str, int],
) -> list[CheckpointEvaluation]:
    """Each phase's evaluation of each checkpoint from its ``played[checkpoint, phase]``
    games, phase by phase, paired against the first checkpoint's games (``redrawn[phase]``:
    how many of the phase's games ``off_selection`` drew again)."""
    results = []
    for phase in phases:
        base = played[checkpoints[0], phase]
        for k in checkpoints:
            traces = played[k, phase]
            changes = None if k == checkpoints[0] else paired_changes(base, traces, phase)
            metrics = dond_metrics(traces, both_seats=phase == "selfplay")
            evaluation = CheckpointEvaluation(k, names[phase], metrics, changes, redrawn[phase])
            results.append(evaluation)
    return results


def _write_summary(out: Path, results: Sequence[CheckpointEvaluation], games: int) -> None:
    """Writes ``results`` as ``out/summary.json`` (one row each) and ``out/summary.md``."""
    (out / "summary.json").write_text(
        json.dumps([r.row() for r in results], indent=1) + "\n", encoding="utf-8"
    )
    (out / "summary.md").write_text(summary_markdown(results, games), encoding="utf-8")
