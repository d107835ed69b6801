"""Catalog, Craigslist loader, splits and scenarios (RELIABILITY D3: golden hashes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratagem.errors import ConfigError
from stratagem.games.bargaining.catalog import (
    builtin_catalog,
    digest,
    load_craigslist,
    scenarios,
    split,
)

# sha256 of the shipped catalog's seed-42 split and of the first 100 scenarios of its test split
# (60 GFT + 40 NGFT, seed 42). A change must be deliberate: update these in the same commit.
GOLDEN = {
    "split_test": "020474efe15c2d2a164ece28e4d526d29821f222846eae78a9c6903ee67ebb64",
    "scenarios": "0e274889aca568349609cf5eb0d905c5594f9cf87aa74573c43566fa4337cd48",
}
SHARED_DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "craigslist"


def test_builtin_catalog_is_a_few_hundred_items_across_categories():
    items = builtin_catalog()
    assert 300 <= len(items) <= 600
    assert len({i.category for i in items}) >= 10
    assert len({(i.title, i.description) for i in items}) == len(items)
    assert all(0 < i.low < i.high for i in items)


def test_split_is_80_8_5_11_5_and_seeded():
    items = builtin_catalog()
    parts = split(items, 42)
    n = len(items)
    assert len(parts["train"]) == round(0.8 * n)
    assert len(parts["validation"]) == round(0.085 * n)
    assert sum(len(p) for p in parts.values()) == n
    assert split(items, 42) == parts and split(items, 43) != parts


def test_scenarios_have_exact_counts_and_ordered_values():
    test = split(builtin_catalog())["test"]
    sc = scenarios(test, 400, 200, seed=42)
    assert sum(s.regime == "GFT" for s in sc) == 400 and len(sc) == 600
    for s in sc:
        assert s.item.low <= min(s.seller_value, s.buyer_value)
        assert max(s.seller_value, s.buyer_value) <= s.item.high + 0.01
        if s.regime == "GFT":
            assert s.buyer_value > s.seller_value
        else:
            assert s.buyer_value <= s.seller_value
    assert scenarios(test, 400, 200, seed=42) == sc
    with pytest.raises(ConfigError):
        scenarios(test, 0, 0)


def test_golden_hashes():
    items = builtin_catalog()
    parts = split(items, 42)
    assert digest(parts["test"]) == GOLDEN["split_test"]
    assert digest(scenarios(parts["test"], 60, 40, seed=42)) == GOLDEN["scenarios"]


def test_craigslist_loader_on_the_public_format(tmp_path):
    listings = [
        {
            "category": "bike",
            "title": "Road bike",
            "description": ["Fast.", "Light."],
            "price": 400,
            "item": "x",
            "post_id": "1",
            "images": [],
            "attrs": [],
        },
        {"category": "phone", "title": "Phone", "description": [], "price": -1},
        {"category": "car", "title": "Car", "description": "One owner.", "price": 5800},
    ]
    path = tmp_path / "craigslist_train.json"
    path.write_text(json.dumps(listings))
    items = load_craigslist(path)
    assert [(i.title, i.low, i.high) for i in items] == [
        ("Road bike", 200.0, 400.0),
        ("Car", 2900.0, 5800.0),
    ]
    assert items[0].description == "Fast. Light."
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_craigslist(bad)


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="real CraigslistBargains files not present")
def test_craigslist_loader_on_real_files():
    for path in sorted(SHARED_DATA.glob("*.json")):
        items = load_craigslist(path)
        assert len(items) > 100 and all(i.high > 0 and i.low == round(i.high / 2, 2) for i in items)
