"""Perspective drills: whole Deal or No Deal games of four turns — a claim, a deal, and the two
closing proposals — that teach which of the two shares written in a deal is one's own.

Every demonstrated deal names both shares, the reader's first ("Deal: you get (A) and I get
(B)"), so each seat's closing proposal is a share already written in the dialogue: the seat that
*read* the deal proposes its first share, A; the seat that *wrote* it proposes its second, B.
Warm starts trained on whole negotiations proposed the last share written — B — from both seats
(docs/results/dond.md), which never agrees. A drill game holds both closing cases in
~500 tokens, where a whole negotiation holds them once in ~1,500 beside everything else.

A drill game is played by the game engine, so every prompt is the game's own: the seat that speaks
first claims a share drawn uniformly from the pool's divisions (neither nothing nor everything) in
one of the negotiators' claim wordings; the other accepts it with a deal in one of their deal
wordings; then both propose as ``strategies.dond.Negotiator``'s protocol does — the claimant its
claim (the share the deal granted it), the accepter the rest. Each game yields both seats' chats
(the claimant's, then the accepter's), under λ = 0 and λ = 1 in turn (the two objectives of the
warm-start recipe) and its 6-turn cap; the first speaker is drawn by the game from the episode seed,
the context from the training side of ``split_contexts(contexts, seed)`` — the split ``train
selfplay --seed SEED`` and ``python -m experiments.claim_probe --seed SEED`` hold their evaluation
contexts out of, so drills made with the same seed never show one. Every drill game ends in an
agreement.

Refusal drills (``refuse``, ``python -m experiments.drills --drills-refuse``) add the one check the
accepter above never makes: it reads the value line of its own prompt, finds its highest value per
unit and accepts only a claim that leaves it at least one unit of an item worth that much. A claim
that takes them all (about two random claims in five) is refused with a counter-claim that names the
item — "I value the hats most, and that leaves me none." — and asks for the rest the claim offered
plus half of those units (at least one); the claimant deals on the counter-claim, and both propose.
Five turns, inside the same cap. The check needs no arithmetic: one comparison of three values and
one count read from the claim. A refused game is kept only when the counter-claim leaves the
claimant something it values and no two items share the accepter's top value (so the named item is
the one it values most); the rest are drawn again. With ``check`` (``--drills-check``) the first
answer writes the check before it deals or refuses, in both branches — its best item type and value
per unit, then how many units of it the claim leaves ("My best: hats, 4 each. Left to me: 0, so I
refuse."; tied top types are named together and their units counted together) — in place of the
refusal's naming line.

Joint drills (``joint``, ``python -m experiments.drills --drills-joint``) teach the value talk that
λ = 1 needs: a division better for both can only be found by a seat that knows both seats' values.
The claimant opens with its values stated (one of the negotiators' values wordings) and a random
claim; the accepter deals only on a *joint-best* claim — one whose division is worth the most to
both seats together under its own values and the claimant's stated ones — and otherwise states its
own values and counter-claims the joint-best division nearest the claim: every unit of an item type
it values more than the claimant said it does, none of a type it values less, and a type both value
the same as the claim offered it. The claimant deals on it, and both propose. The check is three
comparisons of two small numbers, one per item type, each read from the chat; a random claim is
joint-best about one time in ten, so most joint drills counter-claim. Joint drills are played under
λ = 1 only (the objective the joint-best division maximises). With ``check`` (``--drills-check``)
the accepter's first answer writes the check before it deals or counter-claims — per item type its
own value, the claimant's stated one and whose the type is ("Books: 3 to me, 0 to you, so mine.
Hats: …") — in place of its values statement, so that each comparison is two numbers copied from the
chat and one word after them, before the answer that depends on them (as the bargaining responder's
thought writes both prices before "higher" or "lower"). The games and the divisions claimed and
answered are those of the same seed without it; only the words of the first answer differ.

Flawed-claim drills (``flawed``, ``python -m experiments.drills --drills-joint --drills-flawed``):
joint drills a third of whose claims, openings and counter-claims, write the reader's share one unit
off, named by the seat that answers; ``flaws`` says why and how.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from experiments.drills.dond.flaws import FLAW_RATE, claim_flaw, flawed_rest
from stratagem.agent import Agent
from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.game import HasHeldOutScenarios
from stratagem.games import get_game
from stratagem.games.dond import (
    ITEMS,
    DondView,
    Items,
    Say,
    Turn,
    complement,
    divisions,
    render_share,
)
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies.dond import (
    Negotiator,
    best_type,
    claim_text,
    gain,
    inferred_values,
    their_claim,
)
from stratagem.strategies.dond.talk import CLAIMS, VALUES, claim_in, deal_in, values_text
from stratagem.trace import Trace
from stratagem.training.sft.data import Chat, agreement_of

LAMS = (0.0, 1.0)  # the objectives of the warm-start recipe, in turn
MAX_TURNS = 6  # the warm-start recipe's turn cap (the prompts state it)
NAME = "DrillPartner"


@dataclass(frozen=True)
class DrillPartner(Negotiator):
    """Opening, claims a random share; answering a claim, accepts it; then proposes as the
    protocol does."""

    stream: ClassVar[str] = "perspective-drills"  # the seed stream of its drill games
    lams: ClassVar[tuple[float, ...]] = LAMS  # the objectives its drill games take in turn

    def accepts(self, view: DondView, share: Items) -> bool:
        """Accepts every share offered."""
        return True

    def kept(self, trace: Trace) -> bool:
        """Whether a drill game played by this partner becomes drills: every one."""
        return True

    def unlearned(self, counts: Items, answer: str) -> bool:
        """Whether an answer of a kept drill game carries no loss: none does."""
        return False

    def demand(self, view: DondView) -> Items:
        """Never asked: the protocol asks for a demand only when a seat must claim again or has
        nothing else to propose, which a drill game never reaches."""
        raise AssertionError("a drill game never needs a demand")

    def choose(self, view: DondView, rng: random.Random) -> Turn:
        """Returns a random claim when opening, else the protocol's turn."""
        if view.dialogue:
            return super().choose(view, rng)
        whole = view.counts
        shares = [s for s in divisions(whole) if s != whole and any(s)]
        share = rng.choice(shares)
        wording = rng.randrange(len(CLAIMS))
        return Say(claim_text(share, complement(whole, share), wording))


def refusal_check(values: Items, offered: Items) -> str:
    """The refusal drills' written check: the item types of highest value per unit, that value,
    and how many of their units ``offered`` holds, then the decision ("My best: hats, 4 each.
    Left to me: 0, so I refuse.")."""
    top = max(values)
    best = [i for i, v in enumerate(values) if v == top]
    left = sum(offered[i] for i in best)
    named = " and ".join(ITEMS[i] for i in best)
    return f"My best: {named}, {top} each. Left to me: {left}, so I {'deal' if left else 'refuse'}."


@dataclass(frozen=True)
class RefusingDrillPartner(DrillPartner):
    """``DrillPartner``, except that answering the opening claim it refuses one that leaves it
    no unit of the item it values most, with a counter-claim (module docstring); the claimant
    accepts the counter-claim."""

    check: bool = False  # the first answer writes the check before it deals or refuses

    stream: ClassVar[str] = "refusal-drills"

    def accepts(self, view: DondView, share: Items) -> bool:
        """The claimant accepts any counter-claim; the first answer needs in ``share`` a unit of
        an item type of this seat's highest value."""
        top = max(view.values)
        return bool(view.my_messages()) or any(
            n > 0 and v == top for n, v in zip(share, view.values, strict=True)
        )

    def kept(self, trace: Trace) -> bool:
        """A game without a refusal; or one whose counter-claim leaves the claimant something it
        values, refused by an accepter with one item type of highest value."""
        if len(trace.decisions) == 4:  # claim, deal and the two proposals
            return True
        info = trace.rounds[-1].info
        claimant = trace.decisions[0].seat
        values = info["values"][1 - claimant]
        return info["item_scores"][claimant] > 0 and values.count(max(values)) == 1

    def demand(self, view: DondView) -> Items:
        """The counter-claim: the rest the opening claim offered, plus half (at least one) of
        the units of the item type this seat values most."""
        offered = complement(view.counts, cast(Items, their_claim(view)))
        top = best_type(view)
        wanted = list(offered)
        wanted[top] = max(1, view.counts[top] // 2)
        return cast(Items, tuple(wanted))

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """Names the item valued most, and that the claim leaves none of it; with ``check``,
        the check instead."""
        if self.check:
            return (self.check_text(view),)
        item = ITEMS[best_type(view)]
        return (f"I value the {item} most, and that leaves me none.",)

    def check_text(self, view: DondView) -> str:
        """The check of the opening claim this seat answers."""
        return refusal_check(view.values, complement(view.counts, cast(Items, their_claim(view))))

    def choose(self, view: DondView, rng: random.Random) -> Turn:
        """The protocol's turn; with ``check``, a deal on the opening claim starts with it."""
        return _checked(self, view, super().choose(view, rng))


def joint_check(mine: Items, theirs: Items) -> str:
    """The joint drills' written check: per item type both values, the writer's first, and whose
    the type is under λ = 1 ("Books: 3 to me, 0 to you, so mine.")."""
    return " ".join(
        f"{item.capitalize()}: {m} to me, {t} to you, so "
        + ("mine." if m > t else "yours." if m < t else "the same.")
        for item, m, t in zip(ITEMS, mine, theirs, strict=True)
    )


@dataclass(frozen=True)
class JointDrillPartner(DrillPartner):
    """``DrillPartner`` for λ = 1, except that it opens with its values stated, deals only on a
    joint-best claim under the values the other stated, and otherwise states its values and
    counter-claims the joint-best division nearest the claim (module docstring), on which the
    claimant deals."""

    check: bool = False  # the first answer writes the check in place of its values
    flawed: bool = False  # a third of the claims it writes put the reader's share one unit off

    stream: ClassVar[str] = "joint-drills"
    lams: ClassVar[tuple[float, ...]] = (1.0,)

    def accepts(self, view: DondView, share: Items) -> bool:
        """The claimant accepts the counter-claim (joint-best, though with ``check`` it states
        no values to infer that from); the first answer needs the division that leaves it
        ``share`` to be joint-best under its values and the ones the claimant stated."""
        if view.my_messages():
            return True
        return gain(view, share) >= max(gain(view, s) for s in divisions(view.counts)) - 1e-9

    def demand(self, view: DondView) -> Items:
        """The counter-claim: each item type to the seat that values it more (the claimant's
        values as it stated them), a type both value the same as the opening claim offered."""
        offered = complement(view.counts, cast(Items, their_claim(view)))
        theirs = inferred_values(view)
        wanted = [
            n if mine > their else 0 if mine < their else given
            for n, mine, their, given in zip(view.counts, view.values, theirs, offered, strict=True)
        ]
        return cast(Items, tuple(wanted))

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """Its values, stated openly, in the negotiators' wordings that do not ask for the
        other's values (the claimant stated them); with ``check``, the check instead."""
        if self.check:
            return (self.check_text(view),)
        return tuple(values_text(view.values, i) for i, w in enumerate(VALUES) if "?" not in w)

    def check_text(self, view: DondView) -> str:
        """The check of the opening claim this seat answers (the values the claimant stated)."""
        theirs = cast(Items, tuple(round(v) for v in inferred_values(view)))
        return joint_check(view.values, theirs)

    def choose(self, view: DondView, rng: random.Random) -> Turn:
        """Opening: its values, then a random claim; a deal with ``check``: the check, then the
        deal; else the protocol's turn. With ``flawed``, a claim it answers that does not add up
        is named first, and a third of the claims it writes are flawed (``flaws``)."""
        turn = super().choose(view, rng)
        if not view.dialogue:
            stated = values_text(view.values, rng.randrange(len(VALUES)))
            turn = Say(f"{stated} {cast(Say, turn).text}")
        else:
            turn = _checked(self, view, turn)
        if not self.flawed or not isinstance(turn, Say):
            return turn
        last = view.their_messages()[-1] if view.their_messages() else ""
        if (flaw := claim_flaw(view.counts, last)) is not None:
            turn = Say(f"{flaw} {turn.text}")
        share = claim_in(turn.text)
        if share is not None and deal_in(turn.text) is None and rng.random() < FLAW_RATE:
            wrong = flawed_rest(view.counts, share, rng)
            right = render_share(complement(view.counts, share))
            turn = Say(turn.text.replace(right, render_share(wrong), 1))  # the reader's share
        return turn

    def unlearned(self, counts: Items, answer: str) -> bool:
        """Whether ``answer`` is a flawed claim (``flaws``): kept in its writer's context,
        without loss."""
        return self.flawed and claim_flaw(counts, answer.removeprefix("[message] ")) is not None


def _checked(partner: RefusingDrillPartner | JointDrillPartner, view: DondView, turn: Turn) -> Turn:
    """``turn``, with the partner's check before it when it deals on the opening claim with
    ``check`` on (a counter-claim carries the check already, as its preamble)."""
    if partner.check and isinstance(turn, Say) and view.dialogue and not view.my_messages():
        if deal_in(turn.text) is not None:
            return Say(f"{partner.check_text(view)} {turn.text}")
    return turn


OPTIONS = ("refuse", "joint", "check", "flawed")  # the DrillSettings these drills take


def drills(
    n: int,
    seed: int,
    refuse: bool = False,
    joint: bool = False,
    check: bool = False,
    flawed: bool = False,
) -> Iterator[Chat]:
    """Returns ``n`` perspective drills (chats), deterministic in ``seed``: two per drill game,
    the claimant's first; with ``refuse``, refusal drills; with ``joint``, joint drills, whose
    first answer writes its check with ``check`` (joint or refusal drills) and a third of whose
    claims are flawed with ``flawed`` (named by the seat answering them, without loss in the
    writer's chat; ``flaws``).

    Raises:
        ConfigError: both ``refuse`` and ``joint`` (two kinds of answer to the opening claim),
            ``check`` without either, or ``flawed`` without ``joint``.
    """
    if flawed and not joint:
        raise ConfigError("--drills-flawed is for joint drills: add --drills-joint")
    if check and not (joint or refuse):
        raise ConfigError(
            "--drills-check is for joint or refusal drills: add --drills-joint or --drills-refuse"
        )
    if refuse and joint:
        raise ConfigError(
            "--drills-refuse and --drills-joint are two kinds of dond drills; pick one"
        )
    partner: DrillPartner = DrillPartner()
    if joint or refuse:
        partner = JointDrillPartner(check, flawed) if joint else RefusingDrillPartner(check)
    return _drill_chats(n, seed, partner)


def _drill_chats(n: int, seed: int, drill_partner: DrillPartner) -> Iterator[Chat]:
    partner = cast(Agent, drill_partner)  # a Strategy's name is read-only, not the Protocol's
    finished: list[Episode] = []  # each drill game's episode, for its chats
    games = {lam: get_game("dond", lam=lam, max_turns=MAX_TURNS) for lam in drill_partner.lams}
    made = 0
    for index in itertools.count():
        if made == n:
            return
        lam = drill_partner.lams[index % len(drill_partner.lams)]
        game_seed = derive(seed, drill_partner.stream, index)
        spec = EpisodeSpec(
            f"drill-{index}",
            game_seed,
            (partner, partner),
            {"names": (NAME, NAME)},
            # never an evaluation context
            cast(HasHeldOutScenarios, games[lam]).training_scenario(seed, game_seed),
        )
        (trace,) = play(games[lam], [spec], on_episode=finished.append)
        episode = finished.pop()
        if trace.status != "complete" or not agreement_of(trace):
            raise AssertionError(f"drill game {index} did not agree: {trace.status}")
        if not drill_partner.kept(trace):
            continue
        claimant = trace.decisions[0].seat
        for seat in (claimant, 1 - claimant):
            if made == n:
                return
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": episode.rules(seat) or ""},
                *(m.to_dict() for m in episode.chat(seat)),
            ]
            counts = cast(Items, tuple(trace.scenario["counts"]))
            for message in messages:
                if message["role"] == "assistant" and drill_partner.unlearned(
                    counts, message["content"]
                ):
                    # marked as an answer the game refused: in the context, without loss
                    message["refused"] = True
            actions = tuple(d.action for d in trace.decisions if d.seat == seat)
            yield Chat(
                "dond",
                NAME,
                "drill",
                actions,
                messages,
                score=trace.totals()[seat],
                agreement=True,
            )
            made += 1
