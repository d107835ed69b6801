"""Training samples of the policy-gradient trainers and the sequences their update reads.

A ``Turn`` is one generated decision: its prompt and answer tokens, the rollout-time
log-probabilities of the answer (the *old* policy of the PPO ratio), its advantage and its loss
weight. ``pack`` lays an episode's decisions into one sequence (every token read once);
``per_decision`` is the naive form, one sequence per decision, which the tests compare.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Turn:
    """One generated decision of the agent: its tokens, the rollout-time log-probabilities of
    them, its advantage and its weight in the step's loss."""

    episode: str
    prompt_ids: list[int]
    token_ids: list[int]
    old_logprobs: list[float]
    advantage: float
    weight: float  # the decision's share of the step's loss; split evenly over the tokens


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


def sequences_of(turns: list[Turn], packing: bool) -> list[TrainSequence]:
    """``pack(turns)`` when ``packing``, else ``per_decision(turns)``."""
    return pack(turns) if packing else per_decision(turns)
