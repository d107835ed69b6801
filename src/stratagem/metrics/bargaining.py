"""Bilateral-trade metrics from traces (SPEC §8; seed 004 §3.3, §4.2).

``negotiation_rows`` turns each trace into two rows, one per role, with every per-negotiation
quantity; ``summarise`` averages them per agent × role × regime (GFT/NGFT) with standard errors;
``price_tiers`` splits by quintile of the item's reference price; ``profiles`` gives the six radar
axes. Definitions:

- violation (self): the agent *accepted* a deal with negative own utility; induced: the
  opponent did;
- surplus share: on GFT deals with non-negative utility for both, buyer (v_b − p)/(v_b − v_s),
  seller the rest;
- seller initial aggressiveness: first ask / v_s; buyer gap closure: (ask − first bid) / ask and
  reservation ratio: (v_b − first bid) / v_b, where ask is the listing price;
- concession rate (valid deals only): the mean over consecutive own offers of the fraction of the
  remaining room to one's reservation value given up — seller (p₍ₖ₋₁₎ − pₖ)/(p₍ₖ₋₁₎ − v_s), buyer
  (bₖ − b₍ₖ₋₁₎)/(v_b − b₍ₖ₋₁₎);
- temporal patience: rounds until the negotiation ended;
- consistency: no acceptance worse than an offer the agent had already refused, and no proposal
  worse for itself than an offer it had already refused (a counter-offer refuses the open offer).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from stratagem.trace import Trace

METRICS = (
    "violation",
    "induced_violation",
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
    "parse_failures",
)
ROLES = ("seller", "buyer")
NAN = float("nan")


def negotiation_rows(traces: Iterable[Trace]) -> list[dict]:
    rows = []
    for t in traces:
        if t.status != "complete" or not t.rounds:
            continue
        info = t.rounds[0].info
        sc = t.scenario
        values = (sc["seller_value"], sc["buyer_value"])
        reference = (sc["item"]["low"] + sc["item"]["high"]) / 2
        utilities = t.rounds[0].payoffs
        offers = info["offers"]
        inconsistent = _inconsistencies(info["events"])
        for seat, role in enumerate(ROLES):
            other = 1 - seat
            deal, u = info["deal"], utilities[seat]
            rows.append(
                {
                    "episode_id": t.episode_id,
                    "scenario": sc["index"],
                    "agent": t.agents[seat],
                    "opponent": t.agents[other],
                    "role": role,
                    "regime": sc["regime"],
                    "reference": reference,
                    "deal": float(deal),
                    "utility": u,
                    "deal_utility": u if deal else NAN,
                    "violation": float(deal and info["accepted_by"] == seat and u < 0),
                    "induced_violation": float(
                        deal and info["accepted_by"] == other and utilities[other] < 0
                    ),
                    "surplus_share": _surplus_share(sc, deal, info["price"], utilities, seat),
                    "aggressiveness": offers[0][0] / values[0]
                    if role == "seller" and offers[0]
                    else NAN,
                    "gap_closure": _gap_closure(offers) if role == "buyer" else NAN,
                    "reservation_ratio": (values[1] - offers[1][0]) / values[1]
                    if role == "buyer" and offers[1]
                    else NAN,
                    "concession": _concession(offers[seat], values[seat], role)
                    if deal and min(utilities) >= 0
                    else NAN,
                    "rounds": float(info["rounds"]),
                    "consistent": float(not inconsistent[seat]),
                    "parse_failures": float(info["parse_failures"][seat]),
                }
            )
    return rows


def _surplus_share(sc: dict, deal: bool, price, utilities, seat: int) -> float:
    if sc["regime"] != "GFT" or not deal or min(utilities) < 0:
        return NAN
    total = sc["buyer_value"] - sc["seller_value"]
    buyer = (sc["buyer_value"] - price) / total
    return buyer if seat == 1 else 1.0 - buyer


def _gap_closure(offers) -> float:
    if not offers[0] or not offers[1]:
        return NAN
    ask = offers[0][0]
    return (ask - offers[1][0]) / ask


def _concession(own: list[float], value: float, role: str) -> float:
    steps = []
    for prev, cur in zip(own, own[1:], strict=False):
        room = prev - value if role == "seller" else value - prev
        if room > 0:
            given = prev - cur if role == "seller" else cur - prev
            steps.append(given / room)
    return float(np.mean(steps)) if steps else NAN


def _inconsistencies(events: list[dict]) -> list[bool]:
    """Per seat: accepted or proposed something worse for itself than an offer it refused."""
    standing: list[float | None] = [None, None]
    refused: list[float | None] = [None, None]  # seller: best refused bid; buyer: best refused ask
    bad = [False, False]

    def worse(seat: int, price: float) -> bool:
        best = refused[seat]
        return best is not None and (price < best if seat == 0 else price > best)

    def refuse(seat: int, price: float | None) -> None:
        if price is None:
            return
        best = refused[seat]
        better = best is None or (price > best if seat == 0 else price < best)
        refused[seat] = price if better else best

    for e in events:
        seat, kind = e["seat"], e["kind"]
        if kind in ("listing", "offer"):
            bad[seat] |= worse(seat, e["price"])
            refuse(seat, standing[1 - seat])
            standing[1 - seat] = None
            standing[seat] = e["price"]
        elif kind == "respond" and e["price"] is not None:
            if e["accept"]:
                bad[seat] |= worse(seat, e["price"])
            else:
                refuse(seat, e["price"])
                standing[1 - seat] = None
    return bad


def _stats(series: pd.Series) -> tuple[float, float, int]:
    x = series.dropna()
    n = len(x)
    if n == 0:
        return NAN, NAN, 0
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0, n


def summarise(
    rows: pd.DataFrame, by: tuple[str, ...] = ("agent", "role", "regime")
) -> pd.DataFrame:
    """Mean, standard error and count of every metric per group (long format)."""
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


def with_tiers(rows: pd.DataFrame, tiers: int = 5) -> pd.DataFrame:
    """Rows with ``tier`` = the quintile (Q1 lowest) of the scenario's reference price."""
    refs = rows.drop_duplicates("scenario").set_index("scenario")["reference"].sort_values()
    labels = [f"Q{i + 1}" for i in range(tiers)]
    ranks = pd.Series(np.arange(len(refs)), index=refs.index)
    tier_of = pd.cut(ranks, bins=min(tiers, len(refs)), labels=labels[: min(tiers, len(refs))])
    return rows.assign(tier=rows["scenario"].map(tier_of).astype(str))


def price_tiers(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metric means per agent × role × tier, their spreads max − min over tiers)."""
    tiered = with_tiers(rows)
    means = tiered.groupby(["agent", "role", "tier"])[list(METRICS)].mean().reset_index()
    spreads = (
        means.groupby(["agent", "role"])[list(METRICS)]
        .agg(lambda s: s.max() - s.min())
        .reset_index()
    )
    return means, spreads


def profiles(rows: pd.DataFrame) -> pd.DataFrame:
    """The six radar axes per agent (0-100, both roles pooled)."""
    tiered = with_tiers(rows)
    out = []
    for agent, g in tiered.groupby("agent", sort=True):
        gft, ngft = g[g.regime == "GFT"], g[g.regime == "NGFT"]
        surplus_by_tier = gft.groupby("tier")["surplus_share"].mean().dropna()
        seller_aggr = g["aggressiveness"].dropna()
        gap = g["gap_closure"].dropna()
        anchoring = np.nanmean(
            [
                np.clip(100 * (seller_aggr.mean() - 1), 0, 100) if len(seller_aggr) else np.nan,
                np.clip(100 * gap.mean(), 0, 100) if len(gap) else np.nan,
            ]
        )
        out.append(
            {
                "agent": agent,
                "IR compliance": 100 - 100 * _mean(gft["violation"]),
                "surplus %": 100 * _mean(gft["surplus_share"]),
                "deal rate %": 100 * _mean(gft["deal"]),
                "anchoring": float(anchoring),
                "consistency": 100 - 100 * (surplus_by_tier.max() - surplus_by_tier.min())
                if len(surplus_by_tier)
                else NAN,
                "pressure resistance": 100 - 100 * _mean(ngft["violation"]),
            }
        )
    return pd.DataFrame(out)


def _mean(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.mean()) if len(s) else NAN


def pairwise(rows: pd.DataFrame, metric: str, role: str) -> pd.DataFrame:
    """Mean ``metric`` of the ``role`` side for every pairing: rows buyers, columns sellers."""
    side = rows[rows.role == role]
    seller = np.where(side.role == "seller", side.agent, side.opponent)
    buyer = np.where(side.role == "buyer", side.agent, side.opponent)
    agents = sorted(set(rows.agent))
    table = (
        side.assign(seller=seller, buyer=buyer)
        .pivot_table(index="buyer", columns="seller", values=metric, aggfunc="mean", dropna=False)
        .reindex(index=agents, columns=agents)  # pairings without a value stay, as NaN
    )
    table.index.name, table.columns.name = "buyer", "seller"
    return table
