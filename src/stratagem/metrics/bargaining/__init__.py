"""Bilateral-trade metrics from traces (SPEC §8; seed 004 §3.3.3, §4.2, Tables 7-8).

``negotiation_rows`` turns each trace into two rows, one per role, with every per-negotiation
quantity; ``summarise`` averages them per agent × role × regime (GFT/NGFT) with standard errors;
``ranking`` gives the paper's ranking score; ``price_tiers`` splits by quintile of the reference
price or of the agent's own reservation value; ``profiles`` gives the six radar axes per role;
``pairwise`` the heatmap tables. The per-negotiation rows and their definitions live in
``metrics.bargaining.rows`` (re-exported here). The ranking score is surplus share × deal rate,
GFT, per agent and role (seed 004 Table 7).

Price tiers: quintile edges are computed once per tournament from the distinct scenarios of each
regime (``numpy.quantile``), and a value's tier depends only on the value, so ties share a tier
and the tiers do not depend on row order.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from stratagem.errors import ConfigError
from stratagem.metrics.bargaining.rows import (
    METRICS,
    MIN_VERSION,
    NAN,
    NGFT_METRICS,
    REGIMES,
    ROLES,
    aggressiveness,
    concession,
    consistency_checks,
    gap_closure,
    negotiation_rows,
    reservation_ratio,
    surplus_share,
)

__all__ = [
    "METRICS",
    "MIN_VERSION",
    "NAN",
    "NGFT_METRICS",
    "PROFILE_AXES",
    "REGIMES",
    "ROLES",
    "TIERS",
    "TIER_BASES",
    "aggressiveness",
    "canonical",
    "concession",
    "consistency_checks",
    "gap_closure",
    "negotiation_rows",
    "pairwise",
    "price_tiers",
    "profiles",
    "ranking",
    "reservation_ratio",
    "summarise",
    "surplus_share",
    "tier_edges",
    "with_tiers",
]

TIERS = 5
TIER_BASES = ("reference", "own")  # the item's reference price; the agent's own reservation value


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
