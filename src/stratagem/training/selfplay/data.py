"""Filtered behaviour cloning's data (SPEC §7; seed 002 §3): which (game, seat) pairs of an
iteration are kept, the chat each kept seat held, and its tokenized row with the loss on that
seat's accepted answers only. The contexts its games are played on, training and evaluation
disjoint, are ``games.dond.split_contexts``'. See ``selfplay``'s module docstring for the loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stratagem.game import Game, Seat
from stratagem.games.dond.contexts import complement, divisions, objective_scores, score
from stratagem.metrics.dond import accepted, complete
from stratagem.play import EpisodeSpec, play
from stratagem.trace import Trace, TraceWriter, read_traces
from stratagem.training.selfplay.args import SelfPlayArgs
from stratagem.training.trl_config import IGNORE, tokenize_chat


def kept_seats(
    traces: Sequence[Trace], lam: float, per_context: bool = False, min_of_best: float = 0.0
) -> list[tuple[Trace, Seat]]:
    """Every (game, seat) whose objective score is above the mean of all seat scores of the
    complete games, in game order; under λ = −1 also each seat of an agreement scoring exactly 0.
    With ``per_context`` the mean is that of the seats of the games played on the same context
    (counts and values), not of the whole iteration. Strictly above: where every seat of a
    context scores alike, none of them is kept. With ``min_of_best`` above 0, every kept seat
    must also score at least that fraction of its best objective score (``near_best``), the
    zero-score seats under λ = −1 included (so none of those is kept).

    Games that ended in an error (not aborts: those score 0 and count) are left out.

    Raises:
        ValueError: with ``per_context``, a game whose trace records no context.
    """
    games = complete(traces)
    keys = [_context_key(t) if per_context else None for t in games]
    groups: dict[object, list[float]] = {}
    for t, key in zip(games, keys, strict=True):
        groups.setdefault(key, []).extend(t.rounds[-1].payoffs)
    means = {key: math.fsum(xs) / len(xs) for key, xs in groups.items()}
    return [
        (t, seat)
        for t, key in zip(games, keys, strict=True)
        for seat, x in enumerate(t.rounds[-1].payoffs)
        if (x > means[key] or (lam == -1 and x == 0 and t.rounds[-1].info["agreement"]))
        and near_best(t, seat, min_of_best)
    ]


def best_objective(trace: Trace, seat: Seat) -> float:
    """The highest objective score ``R_i + λ·R_j`` any division of the game's context gives
    ``seat`` had both agreed on it, under the λ the game was played with (its result's
    ``lam``, the λ of its payoffs): the joint-best value under λ = 1, 10 under every λ ≤ 0 on
    a valid context (the seat keeps every item). Never below 0: the seat may keep everything."""
    info = trace.rounds[-1].info
    counts, values, lam = tuple(info["counts"]), info["values"], info["lam"]
    return max(
        objective_scores(
            (score(values[seat], share), score(values[1 - seat], complement(counts, share))), lam
        )[0]
        for share in divisions(counts)
    )


def near_best(trace: Trace, seat: Seat, min_of_best: float) -> bool:
    """Whether ``seat``'s objective score in ``trace`` is at least ``min_of_best`` times its
    ``best_objective`` (always, at 0; a rounding error's margin below counts as reaching it).
    Under λ = 1 this tells a joint-best division from an agreement worth less to the pair, such
    as one seat giving the other everything, which the mean alone keeps whenever failed games
    pull the mean below it."""
    if min_of_best <= 0:
        return True
    x = trace.rounds[-1].payoffs[seat]
    return x >= min_of_best * best_objective(trace, seat) - 1e-9


def kept_partner_seats(
    traces: Sequence[Trace], min_of_best: float = 0.0
) -> list[tuple[Trace, Seat]]:
    """The policy's seat (``meta["seat"]``) of every complete game against a fixed agent whose
    objective score is above the mean of the policy's seats over those games, in game order: the
    filter of ``kept_seats`` with the fixed agent's seats left out of the mean and never kept
    (they are no chat of the policy's). Strictly above, as ``kept_seats``, and with
    ``min_of_best`` near the seat's best as there.

    Raises:
        ValueError: a game whose trace does not say which seat the policy held.
    """
    games = complete(traces)
    seats = []
    for t in games:
        if t.meta.get("seat") not in (0, 1):
            raise ValueError(f"{t.episode_id}: the trace does not say which seat the policy held")
        seats.append(t.meta["seat"])
    own = [t.rounds[-1].payoffs[seat] for t, seat in zip(games, seats, strict=True)]
    if not own:
        return []
    mean = math.fsum(own) / len(own)
    return [
        (t, seat)
        for t, seat, x in zip(games, seats, own, strict=True)
        if x > mean and near_best(t, seat, min_of_best)
    ]


def kept_and_counts(
    traces: list[Trace], partner: list[Trace], args: SelfPlayArgs
) -> tuple[list[tuple[Trace, Seat]], dict[str, Any]]:
    """The kept (game, seat) pairs of an iteration — the self-play games ``traces``' kept seats,
    then the policy's kept seats of the games with the fixed partner ``partner`` — and the log
    entry's counts: ``games``, ``mean_score`` and ``agreement_rate`` of the self-play games;
    ``seats`` and ``kept`` of both (the partner games' policy seats included); with
    ``partner_games``, the partner games' count, kept seats, mean policy score and agreement."""
    finished, partnered = complete(traces), complete(partner)
    kept = kept_seats(
        traces, args.lam, per_context=args.plays_per_context > 1, min_of_best=args.min_of_best
    )
    with_partner = kept_partner_seats(partner, args.min_of_best)
    entry: dict[str, Any] = {
        "games": len(traces),
        "seats": 2 * len(finished) + len(partnered),
        "mean_score": _mean([t.rounds[-1].payoffs[s] for t in finished for s in (0, 1)]),
        "agreement_rate": _mean([float(t.rounds[-1].info["agreement"]) for t in finished]),
        "kept": len(kept) + len(with_partner),
    }
    if args.partner_games:
        entry["partner_games"] = len(partner)
        entry["partner_kept"] = len(with_partner)
        entry["partner_score"] = _mean([t.rounds[-1].payoffs[t.meta["seat"]] for t in partnered])
        entry["partner_agreement_rate"] = _mean(
            [float(t.rounds[-1].info["agreement"]) for t in partnered]
        )
    return kept + with_partner, entry


def _context_key(trace: Trace) -> tuple:
    try:
        return tuple(trace.scenario["counts"]), tuple(map(tuple, trace.scenario["values"]))
    except (KeyError, TypeError):
        raise ValueError(f"{trace.episode_id}: the trace records no context") from None


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
    ``trained`` only, at most ``max_length`` tokens.

    A longer chat loses its earliest exchanges, never its end (``tokenize_chat``'s
    ``cut="start"``): the last answer is the final proposal, the move the game's reward is for,
    and the system turn holds the rules and the seat's private values. The tests check that the
    labelled tokens decode to the trained answers.

    Raises:
        ValueError: ``trained`` does not hold one flag per assistant turn.
    """
    return tokenize_chat(tokenizer, messages, max_length, trained=trained, cut="start")


def sft_rows(tokenizer, kept: Sequence[tuple[Trace, Seat]], max_length: int) -> list[dict]:
    """One tokenized row per kept seat whose chat has an accepted answer within ``max_length``."""
    rows = []
    for trace, seat in kept:
        row = seat_tokens(tokenizer, *seat_chat(trace, seat), max_length)
        if any(label != IGNORE for label in row["labels"]):
            rows.append(row)
    return rows


def play_games(game: Game, specs: Sequence[EpisodeSpec], path: Path, key: str, max_live: int):
    """Plays the ``specs`` not yet in the trace file ``path`` (appending each as it ends) and
    returns the traces of all of them, in spec order. Episode ids get the run's ``key``."""
    return play_groups(game, [specs], [path], key, max_live)[0]


def play_groups(
    game: Game,
    groups: Sequence[Sequence[EpisodeSpec]],
    paths: Sequence[Path],
    key: str,
    max_live: int,
) -> list[list[Trace]]:
    """``play_games`` of several lists of specs (an iteration's phases), each list into its own
    trace file ``paths[i]`` (lists may share one), in one ``play`` call, so that the games of
    the next list fill the batch while those of the one before end, instead of each list
    draining it; returns each list's traces, in spec order. Every game has its own seeds, so
    they are the games the lists played one by one would be wherever the backend's numbers do
    not depend on what shares the batch. A game is skipped when its own file holds it already,
    and read back from that file only.

    Raises:
        ValueError: not one path per list, or an episode id listed twice.
    """
    if len(paths) != len(groups):
        raise ValueError(f"{len(groups)} lists of games but {len(paths)} trace files")
    keyed = [
        [dataclasses.replace(s, episode_id=f"{key}/{s.episode_id}") for s in g] for g in groups
    ]
    every = [s for g in keyed for s in g]
    if len({s.episode_id for s in every}) < len(every):
        raise ValueError("a game is listed twice: every episode id must be unique across lists")
    files = [Path(p).resolve() for p in paths]  # one writer per file, however it is spelt
    with contextlib.ExitStack() as stack:
        writers = {f: stack.enter_context(TraceWriter(f)) for f in dict.fromkeys(files)}
        own = {s.episode_id: f for g, f in zip(keyed, files, strict=True) for s in g}
        done = {episode for episode, f in own.items() if episode in writers[f].done}
        for trace in play(game, every, max_live=max_live, skip=done, on_error="record"):
            writers[own[trace.episode_id]].write(trace)
    found: dict[str, Trace] = {}
    for f in writers:  # a game is read back from its own list's file only
        found.update((t.episode_id, t) for t in read_traces(f) if own.get(t.episode_id) == f)
    return [[found[s.episode_id] for s in g if s.episode_id in found] for g in keyed]


def stalled(values: Sequence[float], patience: int) -> bool:
    """Whether the last ``patience`` values brought nothing above the best value before them
    (never with ``patience`` 0, or before there are ``patience`` + 1 values)."""
    if patience < 1 or len(values) <= patience:
        return False
    return max(values[-patience:]) <= max(values[:-patience])


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0
