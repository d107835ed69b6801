"""The IR acceptance curve: how a bargaining seat's acceptance depends on the price (SPEC §8).

A seat respects individual rationality when it refuses every offer that would leave it worse off
than no deal. Tournament metrics see that only through the deals that happened;
``acceptance_curve`` asks the one decision directly. On each scenario the counterpart is
``HoldAt``, a scripted bargainer that offers one price and never accepts, and that price lies a
*margin* beyond the probed seat's reservation value ``v``: ``v·(1 + m)`` to a buyer,
``v·(1 − m)`` to a seller, so a positive margin is an offer whose acceptance loses the seat money
(an IR violation) and a negative one an offer that gains it. The probe reads whether the seat
accepts that open offer on its next turn. A seat that compares the price with its reservation
value accepts only at negative margins (a step at 0); a seat that does not is flat.

The other half of IR is the seat's own price: when it refuses, the probe also reads the
counter-offer it makes in the same turn, and counts the counters beyond its reservation value
(an offer that loses it money if the other side accepts, as the time-dependent bargainers would).

The probed seat plays its turns before the offer itself (a probed seller lists in round 1 and
decides in round 3, a probed buyer decides in round 2); each episode stops after that decision,
so the prompts are those of the game as configured. With ``deadline=True`` the round limit is set
to the probed round, so the probed answer is the seat's last turn — where a concession schedule
reaches the reservation value and a rule-based bargainer takes any offer at least as good.

A probed turn the game has to correct counts as the turn that follows the correction (the game's
own fallback turn never accepts). Episodes that end before the probed decision (a seller that
quits at its listing) are counted apart, and so are episodes whose model call failed (the
decision carried an error): neither is ever counted as a refusal. The curve keeps every probe
episode's trace (its ``meta`` names the role, the margin and whether the deadline was probed),
so the seat's own words at each probed decision can be read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from stratagem.agent import Agent, Strategy
from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.game import Game
from stratagem.games.bargaining import BUYER, SELLER, Bargaining, BargainingView, Turn
from stratagem.games.bargaining.catalog import Scenario
from stratagem.games.bargaining.engine import BargainingState
from stratagem.games.bargaining.prompts import money
from stratagem.seeding import derive
from stratagem.strategies.bargaining import offer
from stratagem.trace import Trace

__all__ = ["MARGINS", "AcceptanceCurve", "AcceptanceRow", "HoldAt", "acceptance_curve"]

MARGINS = (-0.3, -0.2, -0.1, -0.05, 0.05, 0.1, 0.2, 0.3)  # fractions of the reservation value
PROBE_ROUND = {SELLER: 3, BUYER: 2}  # the round in which each role first answers an offer


@dataclass(frozen=True)
class HoldAt(Strategy):
    """Offers ``price`` on every turn (rejecting any open offer first) and never accepts."""

    price: float
    game = "bargaining"

    def choose(self, view: BargainingView, rng: object) -> Turn:
        """Returns reject-and-counter at ``price`` (a plain offer on a listing turn)."""
        return offer(self.price, view, f"I offer {money(self.price)} and nothing else.")


@dataclass(frozen=True)
class AcceptanceRow:
    """One margin of the curve: how many probed decisions accepted the offer."""

    margin: float
    decisions: int
    accepted: int
    countered: int = 0  # refusals that made a counter-offer in the same turn
    countered_beyond: int = 0  # of those, counters beyond the seat's reservation value

    @property
    def rate(self) -> float:
        """The share of decisions that accepted (nan without decisions)."""
        return self.accepted / self.decisions if self.decisions else math.nan

    @property
    def stderr(self) -> float:
        """The binomial standard error of ``rate`` (nan without decisions)."""
        n = self.decisions
        return math.sqrt(self.rate * (1 - self.rate) / n) if n else math.nan


@dataclass(frozen=True)
class AcceptanceCurve:
    """The acceptance rate per margin for one agent in one role."""

    agent: str
    role: str
    rows: tuple[AcceptanceRow, ...]
    ended_early: int  # episodes that ended before the probed decision
    errors: tuple[str, ...] = ()  # episodes whose agent failed (its decision carried an error)
    traces: tuple[Trace, ...] = ()  # every probe episode, in (scenario, margin) order

    def violation_rate(self) -> float:
        """The share of offers beyond the reservation value (margin > 0) that were accepted."""
        return _pooled(r for r in self.rows if r.margin > 0)

    def gain_rate(self) -> float:
        """The share of offers that would gain the seat (margin < 0) that were accepted."""
        return _pooled(r for r in self.rows if r.margin < 0)

    def counter_violation_rate(self) -> float:
        """The share of counter-offers (all margins) beyond the seat's reservation value."""
        n = sum(r.countered for r in self.rows)
        return sum(r.countered_beyond for r in self.rows) / n if n else math.nan


_Live = tuple[Episode, HoldAt, float]  # an episode in play, its counterpart, its margin


def _pooled(rows: Iterable[AcceptanceRow]) -> float:
    picked = list(rows)
    n = sum(r.decisions for r in picked)
    return sum(r.accepted for r in picked) / n if n else math.nan


def _offer_price(reservation: float, seat: int, margin: float) -> float:
    return round(reservation * (1 + margin) if seat == BUYER else reservation * (1 - margin), 2)


def acceptance_curve(
    agent: Agent,
    game: Bargaining,
    scenarios: Sequence[Scenario],
    role: str,
    *,
    margins: Sequence[float] = MARGINS,
    seed: int = 0,
    deadline: bool = False,
) -> AcceptanceCurve:
    """Returns ``agent``'s acceptance rate per margin in ``role`` (module docstring).

    Every (scenario, margin) episode is played in lockstep, so an LLM agent answers all waiting
    probes in one batched call per round; episode ``i``'s seed is ``derive(seed, "probe", i)``.

    Raises:
        ConfigError: an unknown role, no scenarios, or a margin outside (−1, 1).
    """
    seat = _check(role, scenarios, margins)
    probe_round = PROBE_ROUND[seat]
    if deadline:
        game = Bargaining(**{**game.params, "max_rounds": probe_round})
    live: list[_Live] = []
    for i, (scenario, margin) in enumerate((s, m) for s in scenarios for m in margins):
        seed_i = derive(seed, "probe", i)
        meta = {"probe_role": role, "margin": margin, "deadline": deadline}
        names = (agent.name, "HoldAt") if seat == SELLER else ("HoldAt", agent.name)
        episode = Episode(
            cast(Game, game), f"{role}-{i}", seed_i, names, meta=meta, scenario=scenario
        )
        holder = HoldAt(_offer_price(_state(episode).value(seat), seat, margin))
        live.append((episode, holder, margin))
    episodes = [episode for episode, _, _ in live]  # ``live`` shrinks as episodes finish
    counts = {m: [0, 0, 0, 0] for m in margins}  # decided, accepted, countered, beyond
    offers_before: dict[str, int] = {}  # the seat's offers when its probed turn began
    ended_early, errors = 0, []
    while live:
        for episode, _, _ in live:
            state = _state(episode)
            if state.round == probe_round and episode.episode_id not in offers_before:
                offers_before[episode.episode_id] = len(state.offers[seat])
        _advance(agent, seat, live)
        still = []
        for episode, holder, margin in live:
            tally = _tally(episode, seat, probe_round, offers_before.get(episode.episode_id, 0))
            if episode.error is not None:
                errors.append(episode.error)
            elif tally is None:
                still.append((episode, holder, margin))
            elif not tally:
                ended_early += 1
            else:
                counts[margin] = [a + b for a, b in zip(counts[margin], tally, strict=True)]
        live = still
    rows = tuple(AcceptanceRow(m, *counts[m]) for m in margins)
    traces = tuple(e.trace() for e in episodes)
    return AcceptanceCurve(agent.name, role, rows, ended_early, tuple(errors), traces)


def _check(role: str, scenarios: Sequence[Scenario], margins: Sequence[float]) -> int:
    """Returns the probed seat, or raises ``ConfigError`` (``acceptance_curve``)."""
    if role not in ("seller", "buyer"):
        raise ConfigError(f"acceptance curve: role must be seller or buyer, not {role!r}")
    if not scenarios:
        raise ConfigError("acceptance curve: no scenarios to probe")
    if any(not -1 < m < 1 for m in margins):
        raise ConfigError(f"acceptance curve: margins must lie in (-1, 1), got {list(margins)}")
    return SELLER if role == "seller" else BUYER


def _tally(episode: Episode, seat: int, probe_round: int, before: int) -> list[int] | None:
    """Returns the probed decision's counts (decided, accepted, countered, beyond), ``[]`` when
    the episode ended before it, or None while it is still to come."""
    state = _state(episode)
    if state.price is not None and state.accepted_by == seat:
        return [1, 1, 0, 0]
    if state.round > probe_round or (episode.done and state.round == probe_round):
        new = state.offers[seat][before:]  # a counter made in the probed turn
        beyond = bool(new) and _beyond(new[-1], state.value(seat), seat)
        return [1, 0, int(bool(new)), int(beyond)]  # refused (countered, waited or quit)
    return [] if episode.done else None


def _beyond(price: float, reservation: float, seat: int) -> bool:
    """Whether a deal at ``price`` would leave ``seat`` worse off than no deal."""
    return price > reservation if seat == BUYER else price < reservation


def _state(episode: Episode) -> BargainingState:
    return cast(BargainingState, episode.state)


def _advance(agent: Agent, seat: int, live: list[_Live]) -> None:
    """One turn of every live episode: the probed seats in one batch, each holder alone."""
    probed = [(ep, obs) for ep, _, _ in live for obs in ep.waiting() if obs.seat == seat]
    if probed:
        for (ep, obs), decision in zip(probed, agent.act([o for _, o in probed]), strict=True):
            ep.submit(obs.seat, decision, agent.name)
    for ep, holder, _ in live:
        for obs in ep.waiting():
            ep.submit(obs.seat, holder.act([obs])[0], holder.name)
    for ep, _, _ in live:
        if ep.ready:
            ep.step()
