"""Bilateral-trade metrics from traces (SPEC §8; seed 004 §3.3.3, §4.2, Tables 7-8).

``negotiation_rows`` turns each trace into two rows, one per role, with every per-negotiation
quantity; ``summarise`` averages them per agent × role × regime (GFT/NGFT) with standard errors;
``ranking`` gives the paper's ranking score; ``price_tiers`` splits by quintile of the reference
price or of the agent's own reservation value; ``profiles`` gives the six radar axes per role;
``pairwise`` the heatmap tables. Definitions (seed 004; SPEC §8 where the paper lost a formula):

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
  (bₖ − b₍ₖ₋₁₎)/(v_b − b₍ₖ₋₁₎);
- temporal patience (``rounds``): the round in which the negotiation ended (a round is a turn);
- consistency: the mean of two checks (seed 004 Table 8): ``consistent_accept`` — no acceptance
  worse for oneself than an offer one already refused; ``consistent_offers`` — no proposal worse
  for the opponent than one's own earlier offer the opponent refused (non-monotonic offers). A
  counter-offer refuses the open offer, as an explicit rejection does;
- ranking score: surplus share × deal rate, GFT, per agent and role (seed 004 Table 7).

Price tiers: quintile edges are computed once per tournament from the distinct scenarios of each
regime (``numpy.quantile``), and a value's tier depends only on the value, so ties share a tier
and the tiers do not depend on row order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

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
TIERS = 5
TIER_BASES = ("reference", "own")  # the item's reference price; the agent's own reservation value
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


def canonical(rows: pd.DataFrame) -> pd.DataFrame:
    """Returns rows in (episode id, role) order, so a resumed run (appended in another order)
    gives the same tables to the last bit."""
    if not len(rows):
        return rows
    return rows.sort_values(["episode_id", "role"], kind="stable").reset_index(drop=True)


def _stats(series: pd.Series) -> tuple[float, float, int]:
    x = series.dropna()
    n = len(x)
    if n == 0:
        return NAN, NAN, 0
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0, n


def summarise(
    rows: pd.DataFrame, by: tuple[str, ...] = ("agent", "role", "regime")
) -> pd.DataFrame:
    """Returns mean, standard error and count of every metric per group (long format)."""
    out = []
    for key, group in rows.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for metric in METRICS:
            mean, se, n = _stats(group[metric])
            out.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "metric": metric,
                    "value": mean,
                    "stderr": se,
                    "n": n,
                }
            )
    return pd.DataFrame(out)


def ranking(rows: pd.DataFrame) -> pd.DataFrame:
    """Returns per role and agent the GFT surplus share, deal rate and ranking score (their
    product, seed 004 Table 7), ranked within each role (1 = best)."""
    gft = rows[rows.regime == "GFT"]
    table = (
        gft.groupby(["role", "agent"])
        .agg(surplus_share=("surplus_share", "mean"), deal_rate=("deal", "mean"))
        .reset_index()
    )
    table["score"] = table["surplus_share"] * table["deal_rate"]
    table["rank"] = (
        table.groupby("role")["score"].rank(ascending=False, method="min").astype("Int64")
    )
    order = {r: i for i, r in enumerate(ROLES)}
    return table.sort_values(
        ["role", "rank", "agent"], key=lambda s: s.map(order) if s.name == "role" else s
    ).reset_index(drop=True)


def tier_edges(rows: pd.DataFrame, tiers: int = TIERS) -> pd.DataFrame:
    """Returns the quintile edges per regime and value (reference, seller_value, buyer_value),
    from the distinct scenarios of the rows: one table per tournament, whatever the row order."""
    scenes = rows.drop_duplicates("scenario")
    out = []
    qs = np.linspace(0, 1, tiers + 1)[1:-1]
    for regime in REGIMES:
        group = scenes[scenes.regime == regime]
        for value in ("reference", "seller_value", "buyer_value"):
            if not len(group):
                continue
            edges = np.quantile(np.sort(group[value].to_numpy(dtype=float)), qs)
            out.append(
                {"regime": regime, "value": value, **{f"q{i + 1}": e for i, e in enumerate(edges)}}
            )
    return pd.DataFrame(out)


def with_tiers(
    rows: pd.DataFrame, basis: str = "reference", edges: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Returns ``rows`` with ``tier`` (Q1 lowest … Q5) by the reference price (``basis=
    "reference"``) or by the row's own reservation value (``"own"``: buyers by v_b, sellers by
    v_s), using the regime's ``tier_edges``."""
    if basis not in TIER_BASES:
        raise ConfigError(f"unknown tier basis {basis!r}; choose from {TIER_BASES}")
    edges = tier_edges(rows) if edges is None else edges
    lookup = {
        (r.regime, r.value): np.array([getattr(r, c) for c in edges.columns if c.startswith("q")])
        for r in edges.itertuples()
    }
    tiers = np.empty(len(rows), dtype=object)
    for i, (regime, role, ref, v_s, v_b) in enumerate(
        zip(
            rows.regime, rows.role, rows.reference, rows.seller_value, rows.buyer_value, strict=True
        )
    ):
        if basis == "reference":
            key, value = "reference", ref
        else:
            key, value = ("seller_value", v_s) if role == "seller" else ("buyer_value", v_b)
        tiers[i] = f"Q{int(np.searchsorted(lookup[(regime, key)], value, side='right')) + 1}"
    return rows.assign(tier=tiers)


def price_tiers(
    rows: pd.DataFrame, basis: str = "reference", edges: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Returns (metric means per agent × role × regime × tier, their spreads max − min over
    tiers per agent × role × regime). GFT rows carry every metric; NGFT rows leave out surplus
    share and deal rate (there is no surplus; a deal is a violation)."""
    tiered = with_tiers(rows, basis, edges)
    means, spreads = [], []
    for regime, metrics in (("GFT", METRICS), ("NGFT", NGFT_METRICS)):
        part = tiered[tiered.regime == regime]
        if not len(part):
            continue
        m = part.groupby(["agent", "role", "tier"])[list(metrics)].mean().reset_index()
        m.insert(2, "regime", regime)
        s = m.groupby(["agent", "role"])[list(metrics)].agg(lambda x: x.max() - x.min())
        s = s.reset_index()
        s.insert(2, "regime", regime)
        means.append(m)
        spreads.append(s)
    if not means:
        return pd.DataFrame(), pd.DataFrame()
    return (
        pd.concat(means, ignore_index=True).assign(basis=basis),
        pd.concat(spreads, ignore_index=True).assign(basis=basis),
    )


PROFILE_AXES = (
    "IR compliance",
    "surplus %",
    "deal rate %",
    "anchoring",
    "consistency",
    "pressure resistance",
)


def profiles(rows: pd.DataFrame, edges: pd.DataFrame | None = None) -> pd.DataFrame:
    """Returns the six profile axes per agent and role (seed 004 Tables 17-18).

    IR compliance = 100 − GFT self-violation %; surplus % and deal rate % in GFT; anchoring is
    the raw GFT ratio (seller initial aggressiveness, buyer gap closure), not clipped;
    consistency = 100 − the GFT surplus-share spread (pp) over quintiles of the agent's own
    reservation value; pressure resistance = 100 − NGFT self-violation %.
    """
    tiered = with_tiers(rows, "own", edges)
    out = []
    for (agent, role), g in tiered.groupby(["agent", "role"], sort=True):
        gft, ngft = g[g.regime == "GFT"], g[g.regime == "NGFT"]
        by_tier = gft.groupby("tier")["surplus_share"].mean().dropna()
        anchor = gft["aggressiveness"] if role == "seller" else gft["gap_closure"]
        out.append(
            {
                "agent": agent,
                "role": role,
                "IR compliance": 100 - 100 * _mean(gft["violation"]),
                "surplus %": 100 * _mean(gft["surplus_share"]),
                "deal rate %": 100 * _mean(gft["deal"]),
                "anchoring": _mean(anchor),
                "consistency": 100 - 100 * (by_tier.max() - by_tier.min()) if len(by_tier) else NAN,
                "pressure resistance": 100 - 100 * _mean(ngft["violation"]),
            }
        )
    frame = pd.DataFrame(out)
    if len(frame):
        order = {r: i for i, r in enumerate(ROLES)}
        frame = frame.sort_values(
            ["role", "agent"], key=lambda s: s.map(order) if s.name == "role" else s
        )
    return frame.reset_index(drop=True)


def _mean(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.mean()) if len(s) else NAN


def pairwise(rows: pd.DataFrame, metric: str, role: str, regime: str | None = None) -> pd.DataFrame:
    """Returns the mean ``metric`` of the ``role`` side for every pairing (rows buyers, columns
    sellers), in one regime or both; pairings without a value stay, as NaN."""
    side = rows[rows.role == role]
    if regime is not None:
        side = side[side.regime == regime]
    seller = np.where(side.role == "seller", side.agent, side.opponent)
    buyer = np.where(side.role == "buyer", side.agent, side.opponent)
    agents = sorted(set(rows.agent))
    table = (
        side.assign(seller=seller, buyer=buyer)
        .pivot_table(index="buyer", columns="seller", values=metric, aggfunc="mean", dropna=False)
        .reindex(index=agents, columns=agents)
    )
    table.index.name, table.columns.name = "buyer", "seller"
    return table
