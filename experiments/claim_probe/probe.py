"""The claim probe: what a Deal or No Deal seat answers to an opening claim, beside the answer
of the drills' rule (``python -m experiments.claim_probe``).

Self-play sees a warm start's decisions only through whole games, where a malformed claim, a
missing proposal or the other seat's mistake hides them. The probe asks the accepter's one
decision directly, as the bargaining acceptance curve asks the responder's: on each probe a
scripted claimant — the drills' own opening — claims a random share of a held-out context
(neither nothing nor everything), and the probed seat answers once. The answer is read as the
negotiators read each other — a *deal* on the claim, a *counter-claim* of a share for itself, a
*proposal*, or *other* (neither, or a deal on a share nobody claimed) — and set beside the answer
of the drills' rule on the same view:

- ``refuse`` (λ = 0, ``RefusingDrillPartner``): deal when the claim leaves the seat a unit of an
  item type of its highest value, else counter-claim;
- ``joint`` (λ = 1, ``JointDrillPartner``): the claimant states its values before its claim; deal
  on a joint-best claim, else counter-claim the joint-best division nearest it.

Every answer's kept share (the claim's rest on a deal, the share claimed on a counter-claim) is
also scored on its own: *joint-best* when no division is worth more to both seats together under
their true values (beside *chance*: the share of the pool's divisions that are joint-best, the
rate of a share drawn at random); and whether the answer wrote the rule's check exactly
(``--drills-check``'s "Books: 3 to me, 0 to you, so mine. …" or "My best: hats, 4 each. Left to
me: 0, so I refuse.").

Contexts are the held-out side of ``split_contexts(contexts, seed)`` — the contexts ``train
selfplay --seed S`` evaluates on, for S = ``seed``; probe ``i``'s episode seed is
``derive(seed, "claim-probe", i)``, which draws its context, first speaker and claim. An answer
the game refuses is asked again, as in a game, and the answer it accepts is the one read (the
corrections are counted). Probes whose model call failed are counted apart, never read as an
answer. Each probe episode stops after the probed answer; its trace is kept, its ``meta`` naming
the rule's answer and share. A written check is also read back step by step — numbers copied,
compared, followed (``drills.dond.checks``) — so a wrong decision can be placed.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

from experiments.drills.dond import (
    MAX_TURNS,
    NAME,
    JointDrillPartner,
    RefusingDrillPartner,
)
from experiments.drills.dond.checks import CheckSteps, joint_steps, refusal_steps
from stratagem.agent import Agent
from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.game import Game
from stratagem.games import get_game
from stratagem.games.dond import (
    DondState,
    Items,
    Propose,
    Say,
    complement,
    joint_values,
    split_contexts,
)
from stratagem.seeding import derive
from stratagem.strategies.dond.talk import claim_in, deal_in
from stratagem.trace import Trace

__all__ = ["ANSWERS", "KINDS", "ClaimProbe", "ProbeAnswer", "claim_probe", "read_answer"]

KINDS = {"refuse": 0.0, "joint": 1.0}  # the probe's rule -> the λ its games are played under
ANSWERS = ("deal", "counter", "proposal", "other")


@dataclass(frozen=True)
class ProbeAnswer:
    """One probe: the rule's answer and the probed seat's, each with the share it keeps."""

    rule: str  # "deal" or "counter"
    rule_share: Items
    answer: str  # one of ANSWERS
    share: Items | None  # the share the answer keeps for its seat (deal or counter-claim)
    joint_best: bool  # ``share`` is a division of highest joint value (both true values)
    chance: float  # the share of the pool's divisions that are joint-best
    checked: bool  # the answer writes the rule's check exactly
    corrections: int  # answers the game refused before the one read
    steps: CheckSteps  # its written check, step by step (``drills.dond.checks``)


class _Rule(NamedTuple):
    """The opening claim of one probe and the drills' rule's answer to it."""

    claim: Items  # the claimant's share
    answer: str  # "deal" or "counter"
    share: Items  # the share the rule's answer keeps
    check: str  # the rule's written check of the claim


@dataclass(frozen=True)
class ClaimProbe:
    """Every probe of one agent under one rule, with the failed ones and the traces."""

    agent: str
    kind: str
    answers: tuple[ProbeAnswer, ...]
    errors: tuple[str, ...] = ()  # probes whose model call failed (not in ``answers``)
    traces: tuple[Trace, ...] = ()

    def counts(self) -> dict[str, Counter[str]]:
        """The probed answers per rule answer: ``counts()["counter"]["deal"]`` = dealt where the
        rule counter-claims."""
        table: dict[str, Counter[str]] = {"deal": Counter(), "counter": Counter()}
        for a in self.answers:
            table[a.rule][a.answer] += 1
        return table

    def agreement(self) -> tuple[float, float]:
        """The share of probes whose answer is the rule's decision (deal or counter-claim), and
        its binomial standard error (nan without probes)."""
        return _rate(sum(a.answer == a.rule for a in self.answers), len(self.answers))

    def counters_as_rule(self) -> tuple[int, int]:
        """(counter-claims keeping the rule's share, counter-claims where the rule counters)."""
        both = [a for a in self.answers if a.rule == a.answer == "counter"]
        return sum(a.share == a.rule_share for a in both), len(both)

    def joint_best(self) -> tuple[int, int]:
        """(answers whose kept share is joint-best, answers that keep a share)."""
        kept = [a for a in self.answers if a.share is not None]
        return sum(a.joint_best for a in kept), len(kept)

    def steps(self) -> CheckSteps:
        """Every answer's check steps, summed (``drills.dond.checks``)."""
        return sum((a.steps for a in self.answers), CheckSteps())

    def chance(self) -> float:
        """The joint-best rate a share drawn at random would have on the answers that keep one
        (nan without any)."""
        kept = [a.chance for a in self.answers if a.share is not None]
        return sum(kept) / len(kept) if kept else math.nan


def _rate(k: int, n: int) -> tuple[float, float]:
    if not n:
        return math.nan, math.nan
    p = k / n
    return p, math.sqrt(p * (1 - p) / n)


def read_answer(text: str, claim: Items, counts: Items) -> tuple[str, Items | None]:
    """Returns how a message answers ``claim`` (the claimant's share of ``counts``) and the share
    it keeps for its writer: a deal granting exactly ``claim``, a counter-claim (a claim of a
    possible share), else ``("other", None)``."""
    granted = deal_in(text)
    if granted is not None:
        return ("deal", complement(counts, claim)) if granted == claim else ("other", None)
    share = claim_in(text)
    if share is None or any(x > n for x, n in zip(share, counts, strict=True)):
        return "other", None
    return "counter", share


def claim_probe(agent: Agent, kind: str, n: int, *, seed: int = 42) -> ClaimProbe:
    """Returns ``agent``'s answers to ``n`` opening claims under rule ``kind`` (module
    docstring). The probed seats of all probes answer in one batched call per attempt.

    Raises:
        ConfigError: an unknown ``kind`` or ``n`` < 1.
    """
    if kind not in KINDS:
        raise ConfigError(f"claim probe: kind must be one of {sorted(KINDS)}, not {kind!r}")
    if n < 1:
        raise ConfigError("claim probe: probe at least one claim")
    partner = JointDrillPartner() if kind == "joint" else RefusingDrillPartner()
    game = cast(Game, get_game("dond", lam=KINDS[kind], max_turns=MAX_TURNS))
    split = split_contexts(game.contexts, seed)  # type: ignore[attr-defined]
    episodes = []
    for i in range(n):
        seed_i = derive(seed, "claim-probe", i)
        context = split.draw(held_out=True, seed=seed_i)
        first = DondState(context, seed_i).first  # the claimant: the seat that speaks first
        names = (NAME, agent.name) if first == 0 else (agent.name, NAME)
        meta = {"probe": kind, "index": i}
        episode = Episode(game, f"claim-probe-{i}", seed_i, names, meta=meta, scenario=context)
        episodes.append(episode)
    rules = [_open(episode, partner) for episode in episodes]
    corrections = [0] * n
    live = list(range(n))
    while live:
        waiting = [(i, obs) for i in live for obs in episodes[i].waiting()]
        decisions = agent.act([obs for _, obs in waiting])
        for (i, obs), decision in zip(waiting, decisions, strict=True):
            episodes[i].submit(obs.seat, decision, agent.name)
            if episodes[i].ready:
                episodes[i].step()
        for i in live:
            if episodes[i].error is None and len(_state(episodes[i]).lines) < 2:
                corrections[i] += 1
        live = [i for i in live if not _answered(episodes[i])]
    answers, errors = [], []
    for episode, rule, fixes in zip(episodes, rules, corrections, strict=True):
        if episode.error is not None:
            errors.append(episode.error)
            continue
        episode.meta.update(rule=rule.answer, rule_share=list(rule.share))
        answers.append(_scored(episode, kind, rule, fixes))
    traces = tuple(e.trace() for e in episodes)
    return ClaimProbe(agent.name, kind, tuple(answers), tuple(errors), traces)


def _state(episode: Episode) -> DondState:
    return cast(DondState, episode.state)


def _answered(episode: Episode) -> bool:
    return episode.done or len(_state(episode).lines) >= 2


def _open(episode: Episode, partner: JointDrillPartner | RefusingDrillPartner) -> _Rule:
    """Plays the claimant's opening; returns it with the rule's answer to it."""
    (opening,) = episode.waiting()
    episode.submit(opening.seat, partner.act([opening])[0], partner.name)
    episode.step()
    (probed,) = episode.waiting()
    turn = partner.choose(probed.view, random.Random(probed.seed))
    claim = cast(Items, claim_in(cast(Say, _state(episode).lines[0][1]).text))
    answer, share = read_answer(cast(Say, turn).text, claim, probed.view.counts)
    return _Rule(claim, answer, cast(Items, share), partner.check_text(probed.view))


def _scored(episode: Episode, kind: str, rule: _Rule, corrections: int) -> ProbeAnswer:
    """Reads the probed seat's accepted answer (an episode aborted by refusals reads "other")
    beside the rule's."""
    state = _state(episode)
    claimant, claim = state.lines[0][0], rule.claim
    seat = 1 - claimant
    counts, values = state.context.counts, state.context.values
    answer: str
    share: Items | None
    checked, steps = False, CheckSteps()
    if len(state.lines) < 2:
        answer, share = "other", None
    elif isinstance(turn := state.lines[1][1], Propose):
        answer, share = "proposal", None
    else:
        text = cast(Say, turn).text
        answer, share = read_answer(text, claim, counts)
        checked = rule.check in text
        if kind == "joint":  # the claimant stated its true values
            steps = joint_steps(text, values[seat], values[claimant], counts, share)
        else:
            offered = complement(counts, claim)
            steps = refusal_steps(text, values[seat], offered, answer == "deal")
    joint = joint_values(counts, values, seat)
    top = max(joint.values())
    best = share is not None and joint[share] == top
    chance = sum(v == top for v in joint.values()) / len(joint)
    return ProbeAnswer(
        rule.answer, rule.share, answer, share, best, chance, checked, corrections, steps
    )


def summary_rows(probes: Sequence[ClaimProbe]) -> list[dict[str, object]]:
    """One JSON-ready row per probe set: the confusion counts and the rates."""
    rows = []
    for probe in probes:
        rate, se = probe.agreement()
        as_rule, rule_counters = probe.counters_as_rule()
        best, kept = probe.joint_best()
        rows.append(
            {
                "agent": probe.agent,
                "kind": probe.kind,
                "probes": len(probe.answers),
                "failed": len(probe.errors),
                "counts": {rule: dict(c) for rule, c in probe.counts().items()},
                "agreement": rate,
                "agreement_se": se,
                "counters_as_rule": as_rule,
                "rule_counters": rule_counters,
                "joint_best": best,
                "kept_shares": kept,
                "joint_best_by_chance": probe.chance(),
                "checked": sum(a.checked for a in probe.answers),
                "corrections": sum(a.corrections for a in probe.answers),
                "check_steps": dataclasses.asdict(probe.steps()),
            }
        )
    return rows
