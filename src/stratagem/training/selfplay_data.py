"""Filtered behaviour cloning's kept set and its loss masks (SPEC §7; seed 002 §3): which (game,
seat) pairs of an iteration are kept, the chat each kept seat held, and its tokenized row with the
loss on that seat's accepted answers only. See ``selfplay``'s module docstring for the loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stratagem.game import Seat
from stratagem.metrics.dond import accepted, complete
from stratagem.trace import Trace
from stratagem.training.trl_config import IGNORE, tokenize_chat


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
