"""Perspective drills: whole Deal or No Deal games of four turns — a claim, a deal, and the two
closing proposals — that teach which of the two shares written in a deal is one's own.

Every demonstrated deal names both shares, the reader's first ("Deal: you get (A) and I get
(B)"), so each seat's closing proposal is a share already written in the dialogue: the seat that
*read* the deal proposes its first share, A; the seat that *wrote* it proposes its second, B.
Warm starts trained on whole negotiations proposed the last share written — B — from both seats
(docs/results.md, Deal or No Deal), which never agrees. A drill game holds both closing cases in
~500 tokens, where a whole negotiation holds them once in ~1,500 beside everything else.

A drill game is played by the game engine, so every prompt is the game's own: the seat that
speaks first claims a share drawn uniformly from the pool's divisions (neither nothing nor
everything) in one of the negotiators' claim wordings; the other accepts it with a deal in one
of their deal wordings; then both propose as ``strategies.dond.Negotiator``'s protocol does —
the claimant its claim (the share the deal granted it), the accepter the rest. Each game yields
both seats' chats (the claimant's, then the accepter's), under λ = 0 and λ = 1 in turn (the two
objectives of the warm-start recipe) and its 6-turn cap; the context and the first speaker are
drawn by the game from the episode seed. Every drill game ends in an agreement.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from stratagem.agent import Agent
from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.games.dond import DondView, Items, Say, Turn, complement, divisions
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies.dond import Negotiator, claim_text
from stratagem.strategies.dond_talk import CLAIMS
from stratagem.training.sft_data import Chat, agreement_of

LAMS = (0.0, 1.0)  # the objectives of the warm-start recipe, in turn
MAX_TURNS = 6  # the warm-start recipe's turn cap (the prompts state it)
NAME = "DrillPartner"


@dataclass(frozen=True)
class DrillPartner(Negotiator):
    """Opening, claims a random share; answering a claim, accepts it; then proposes as the
    protocol does."""

    def accepts(self, view: DondView, share: Items) -> bool:
        """Accepts every share offered."""
        return True

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


def drills(n: int, seed: int, far: float = 0.0, in_game: bool = False) -> Iterator[Chat]:
    """Returns ``n`` perspective drills (chats), deterministic in ``seed``: two per drill game,
    the claimant's first.

    Raises:
        ConfigError: ``far`` or ``in_game`` is set (bargaining drill settings; a drill game
            here is a whole game already).
    """
    if far or in_game:
        flag = "--drills-far" if far else "--drills-in-game"
        raise ConfigError(f"{flag} is for --game bargaining drills, not dond")
    return _drill_chats(n, seed)


def _drill_chats(n: int, seed: int) -> Iterator[Chat]:
    partner = cast(Agent, DrillPartner())  # a Strategy's name is read-only, not the Protocol's
    finished: list[Episode] = []  # each drill game's episode, for its chats
    made = 0
    for index in range((n + 1) // 2):
        lam = LAMS[index % len(LAMS)]
        game = get_game("dond", lam=lam, max_turns=MAX_TURNS)
        spec = EpisodeSpec(
            f"drill-{index}",
            derive(seed, "perspective-drills", index),
            (partner, partner),
            {"names": (NAME, NAME)},
        )
        (trace,) = play(game, [spec], on_episode=finished.append)
        episode = finished.pop()
        if trace.status != "complete" or not agreement_of(trace):
            raise AssertionError(f"drill game {index} did not agree: {trace.status}")
        claimant = 0 if trace.decisions[0].seat == 0 else 1
        for seat in (claimant, 1 - claimant):
            if made == n:
                return
            messages = [
                {"role": "system", "content": episode.rules(seat) or ""},
                *(m.to_dict() for m in episode.chat(seat)),
            ]
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
