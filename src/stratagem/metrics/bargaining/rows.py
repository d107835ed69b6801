"""Bilateral-trade metrics per negotiation (SPEC §8; seed 004 §3.3.3, App. C).

Each complete trace becomes two rows, one per role, with every per-negotiation quantity, read
from the trace alone (no pandas), so trainers can score rollouts with it; ``metrics.bargaining``
averages the rows into tables. Definitions (seed 004; SPEC §8 where the paper lost a formula):

- violation (self): the agent is party to a deal with negative own utility, whichever side
  pressed accept; induced: the opponent is; ``violation_any``: either is (the paper's combined
  rate). With v_b < v_s every NGFT deal is a violation for at least one party, so the NGFT
  ``violation_any`` rate equals the NGFT deal rate;
- surplus share: on GFT deals with non-negative utility for both, buyer (v_b − p)/(v_b − v_s),
  seller the rest;
- seller initial aggressiveness: listing price / v_s (NaN when the listing was the engine's
  fallback, not the agent's); buyer gap closure: (ask − first bid) / ask, where ask is the
  seller's latest offer when the buyer first bids; reservation ratio: (v_b − first bid) / v_b;
- concession rate (valid deals only): the mean over consecutive own offers of the fraction of the
  remaining room to one's reservation value given up — seller (p₍ₖ₋₁₎ − pₖ)/(p₍ₖ₋₁₎ − v_s), buyer
  (bₖ − b₍ₖ₋₁₎)/(v_b − b₍ₖ₋₁₎); ``concession_all`` is the same over every negotiation (NGFT has
  no deal valid for both sides, so the valid-deal rate is empty there by construction);
- temporal patience (``rounds``): the round in which the negotiation ended (a round is a turn);
- consistency: the mean of two checks (seed 004 Table 8): ``consistent_accept`` — no acceptance
  worse for oneself than an offer one already refused; ``consistent_offers`` — no proposal worse
  for the opponent than one's own earlier offer the opponent refused (non-monotonic offers). A
  counter-offer refuses the open offer, as an explicit rejection does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from stratagem.errors import ConfigError
from stratagem.trace import Trace

METRICS = (
    "violation",
    "induced_violation",
    "violation_any",
    "utility",
    "deal_utility",
    "surplus_share",
    "deal",
    "aggressiveness",
    "gap_closure",
    "reservation_ratio",
    "concession",
    "rounds",
    "consistent",
    "consistent_accept",
    "consistent_offers",
    "parse_failures",
    "fallbacks",
)
# in NGFT there is no surplus to share, and a deal is a violation (violation_any == deal)
NGFT_METRICS = tuple(m for m in METRICS if m not in ("surplus_share", "deal"))
ROLES = ("seller", "buyer")
REGIMES = ("GFT", "NGFT")
NAN = float("nan")
MIN_VERSION = 2  # rounds and the protocol changed in v2; v1 numbers are not comparable


def negotiation_rows(traces: Iterable[Trace]) -> list[dict]:
    """Returns two rows (seller, buyer) per complete trace with every per-negotiation metric.

    Raises:
        ConfigError: a trace of a bargaining version whose rules these metrics do not measure.
    """
    rows = []
    for t in traces:
        if t.status != "complete" or not t.rounds:
            continue
        if t.version < MIN_VERSION:
            raise ConfigError(
                f"bargaining trace {t.episode_id} is version {t.version}; these metrics need "
                f"version {MIN_VERSION} or later (a round is one turn): rerun the episodes"
            )
        rows.extend(_rows(t))
    return rows


def _rows(t: Trace) -> list[dict]:
    info = t.rounds[0].info
    sc = t.scenario
    values = (sc["seller_value"], sc["buyer_value"])
    utilities = t.rounds[0].payoffs
    deal = bool(info["deal"])
    events = info["events"]
    checks = consistency_checks(events)
    seller_offers = [e for e in events if e["seat"] == 0 and e["kind"] in ("listing", "offer")]
    rows = []
    for seat, role in enumerate(ROLES):
        other = 1 - seat
        own = [
            e["price"] for e in events if e["seat"] == seat and e["kind"] in ("listing", "offer")
        ]
        rows.append(
            {
                "episode_id": t.episode_id,
                "scenario": sc["index"],
                "agent": t.agents[seat],
                "opponent": t.agents[other],
                "role": role,
                "regime": sc["regime"],
                "reference": (sc["item"]["low"] + sc["item"]["high"]) / 2,
                "seller_value": values[0],
                "buyer_value": values[1],
                "own_value": values[seat],
                "deal": float(deal),
                "utility": utilities[seat],
                "deal_utility": utilities[seat] if deal else NAN,
                "violation": float(deal and utilities[seat] < 0),
                "induced_violation": float(deal and utilities[other] < 0),
                "violation_any": float(deal and min(utilities) < 0),
                "surplus_share": surplus_share(sc, deal, info["price"], seat),
                "aggressiveness": aggressiveness(seller_offers, values[0])
                if role == "seller"
                else NAN,
                "gap_closure": gap_closure(events) if role == "buyer" else NAN,
                "reservation_ratio": reservation_ratio(events, values[1])
                if role == "buyer"
                else NAN,
                "concession": concession(own, values[seat], role)
                if deal and min(utilities) >= 0
                else NAN,
                "concession_all": concession(own, values[seat], role),
                "rounds": float(info["rounds"]),
                "consistent": (checks[seat][0] + checks[seat][1]) / 2,
                "consistent_accept": checks[seat][0],
                "consistent_offers": checks[seat][1],
                "parse_failures": float(info["parse_failures"][seat]),
                "fallbacks": float(info["fallbacks"][seat]),
            }
        )
    return rows


def surplus_share(scenario: dict, deal: bool, price: float | None, seat: int) -> float:
    """Returns the seat's share of v_b − v_s on a GFT deal valid for both sides, else NaN."""
    v_s, v_b = scenario["seller_value"], scenario["buyer_value"]
    if scenario["regime"] != "GFT" or not deal or price is None or not v_s <= price <= v_b:
        return NAN
    buyer = (v_b - price) / (v_b - v_s)
    return buyer if seat == 1 else 1.0 - buyer


def aggressiveness(seller_offers: Sequence[dict], seller_value: float) -> float:
    """Returns listing price / v_s, or NaN without an agent-chosen listing."""
    if not seller_offers or seller_offers[0]["kind"] != "listing":
        return NAN
    if seller_offers[0].get("fallback"):
        return NAN  # the engine listed at the catalog high: not the agent's anchor
    return seller_offers[0]["price"] / seller_value


def _first_bid(events: Sequence[dict]) -> tuple[float, float] | None:
    """Returns (the buyer's first bid, the seller's latest offer at that moment), or None."""
    ask = None
    for e in events:
        if e["kind"] not in ("listing", "offer"):
            continue
        if e["seat"] == 0:
            ask = e["price"]
        elif ask is not None:
            return e["price"], ask
        else:
            return None
    return None


def gap_closure(events: Sequence[dict]) -> float:
    """Returns (ask − first bid) / ask against the seller's ask current at the first bid."""
    first = _first_bid(events)
    if first is None:
        return NAN
    bid, ask = first
    return (ask - bid) / ask


def reservation_ratio(events: Sequence[dict], buyer_value: float) -> float:
    """Returns (v_b − first bid) / v_b, or NaN when the buyer never bid."""
    bids = [e["price"] for e in events if e["seat"] == 1 and e["kind"] == "offer"]
    return (buyer_value - bids[0]) / buyer_value if bids else NAN


def concession(own: Sequence[float], value: float, role: str) -> float:
    """Returns the mean fraction of the remaining room to ``value`` given up per own offer."""
    steps = []
    for prev, cur in zip(own, own[1:], strict=False):
        room = prev - value if role == "seller" else value - prev
        if room > 0:
            given = prev - cur if role == "seller" else cur - prev
            steps.append(given / room)
    return float(np.mean(steps)) if steps else NAN


def consistency_checks(events: Sequence[dict]) -> list[tuple[float, float]]:
    """Returns per seat (accept check, offers check), 1.0 when it holds and 0.0 when it fails.

    Accept check: no acceptance worse for the seat than an offer it refused before. Offers check:
    no offer worse for the opponent than one of the seat's own offers the opponent refused.
    Refusing is an explicit rejection or a counter-offer while the offer is open.
    """
    standing: list[float | None] = [None, None]  # open offer of each seat
    refused: list[list[float]] = [[], []]  # per seat: the opponent's offers it refused
    accept_ok = [True, True]
    offers_ok = [True, True]

    def better_for(seat: int, a: float, b: float) -> bool:  # price a better than b for seat
        return a > b if seat == 0 else a < b

    for e in events:
        seat, kind = e["seat"], e["kind"]
        other = 1 - seat
        if kind in ("listing", "offer"):
            price = e["price"]
            # worse for the opponent than my own offer it refused = better for me than it
            if any(better_for(seat, price, q) for q in refused[other]):
                offers_ok[seat] = False
            if standing[other] is not None:
                refused[seat].append(standing[other])
                standing[other] = None
            standing[seat] = price
        elif kind == "respond" and e.get("price") is not None:
            if e["accept"]:
                if any(better_for(seat, q, e["price"]) for q in refused[seat]):
                    accept_ok[seat] = False
            else:
                refused[seat].append(e["price"])
                standing[other] = None
    return [(float(accept_ok[s]), float(offers_ok[s])) for s in (0, 1)]
