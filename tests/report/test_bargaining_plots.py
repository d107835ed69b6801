"""What the bargaining heatmaps and radars plot: values, not file names (SPEC §8)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from stratagem.games.bargaining import Bargaining
from stratagem.metrics import bargaining as bm
from stratagem.play import EpisodeSpec, play
from stratagem.report.bargaining import heatmap_tables, radar_values, report_rows
from stratagem.strategies import get_strategy

NAMES = ["Boulware", "Linear", "NaiveAccepter"]


@pytest.fixture(scope="module")
def rows():
    game = Bargaining(split="test")
    scenes = game.tournament_scenarios(12, 8, seed=3)
    specs = [
        EpisodeSpec(
            f"{a}|{b}|{i:05d}",
            i,
            (get_strategy("bargaining", a), get_strategy("bargaining", b)),
            scenario=sc,
        )
        for a in NAMES
        for b in NAMES
        for i, sc in enumerate(scenes)
    ]
    return report_rows(play(game, specs))


def _expected(rows, column, role, regime):
    side = rows[(rows.role == role) & (rows.regime == regime)]
    buyer = np.where(side.role == "buyer", side.agent, side.opponent)
    seller = np.where(side.role == "seller", side.agent, side.opponent)
    return side.assign(b=buyer, s=seller).groupby(["b", "s"])[column].mean()


@pytest.mark.parametrize("regime", ["GFT", "NGFT"])
def test_the_buyer_aggressiveness_panel_is_the_buyers_gap_closure(rows, regime):
    _, panels = heatmap_tables(rows)[f"{regime}_aggressiveness"]
    (seller_label, seller), (buyer_label, buyer) = panels
    assert "gap closure" in buyer_label and "listing" in seller_label
    # buyers that bid have a value against every seller (NaiveAccepter accepts without bidding)
    assert buyer.loc[["Boulware", "Linear"]].notna().all().all()
    expected = _expected(rows, "gap_closure", "buyer", regime)
    for (b, s), value in expected.items():
        assert buyer.loc[b, s] == pytest.approx(value, nan_ok=True)
    expected = _expected(rows, "aggressiveness", "seller", regime)
    for (b, s), value in expected.items():
        assert seller.loc[b, s] == pytest.approx(value, nan_ok=True)


def test_the_ngft_concession_heatmap_has_values(rows):
    title, panels = heatmap_tables(rows)["NGFT_concession"]
    assert "all negotiations" in title
    for (label, table), role in zip(panels, ("buyer", "seller"), strict=True):
        assert label == role
        assert table.notna().any().any()
        expected = _expected(rows, "concession_all", role, "NGFT")
        for (b, s), value in expected.items():
            if not math.isnan(value):
                assert table.loc[b, s] == pytest.approx(value, nan_ok=True)
    _, gft = heatmap_tables(rows)["GFT_concession"]
    expected = _expected(rows, "concession", "seller", "GFT")
    for (b, s), value in expected.dropna().items():
        assert gft[1][1].loc[b, s] == pytest.approx(value, nan_ok=True)


def test_radar_values_keep_missing_axes_as_gaps_not_zero():
    axes = list(bm.PROFILE_AXES)
    base = {name: 50.0 for name in axes}
    profile = pd.DataFrame(
        [
            {"agent": "A", "role": "seller", **base, "anchoring": 2.0},
            {"agent": "B", "role": "seller", **base, "anchoring": 1.0, axes[0]: math.nan},
            {"agent": "A", "role": "buyer", **base, "anchoring": math.nan},
            {"agent": "B", "role": "buyer", **base, "anchoring": 0.5},
        ]
    )
    values = radar_values(profile)
    top, sellers = values["seller"]
    assert top == 2.0
    assert sellers["A"][axes.index("anchoring")] == 100.0
    assert sellers["B"][axes.index("anchoring")] == 50.0
    assert math.isnan(sellers["B"][0])  # drawn as a gap: was 0 before
    _, buyers = values["buyer"]
    assert math.isnan(buyers["A"][axes.index("anchoring")])
    assert buyers["B"][axes.index("anchoring")] == 100.0
