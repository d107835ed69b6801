"""Bad prices cannot enter a negotiation, and one broken episode cannot stop a tournament
(SPEC §8; RELIABILITY A9): listing files, item lists, code-built turns, payoff bounds, run.json."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stratagem.errors import ConfigError, GameError
from stratagem.games.bargaining import SELLER, Bargaining, Call, Turn
from stratagem.games.bargaining.catalog import Item, Scenario, load_craigslist
from stratagem.games.bargaining.tools import MAX_PRICE
from stratagem.runs import RunFolder
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin

ITEM = Item("Test lamp", "home", "A lamp.", 50.0, 150.0)
SRC = str(Path(__file__).resolve().parents[3] / "src")


def _listings(path: Path, bad_price: object) -> Path:
    rows = [
        {"category": "bike", "title": f"Bike {i}", "description": ["Nice."], "price": 100 + i}
        for i in range(6)
    ]
    rows[3]["price"] = bad_price
    # json.dumps writes NaN and Infinity as the bare tokens real broken files carry
    path.write_text(json.dumps(rows))
    return path


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 5e-324, 0.001, 1e300])
def test_a_listing_with_an_unusable_price_is_refused_by_name(tmp_path, bad):
    path = _listings(tmp_path / "listings.json", bad)
    with pytest.raises(ConfigError) as info:
        load_craigslist(path)
    message = str(info.value)
    assert "\n" not in message
    assert "listings.json: listing 3 ('Bike 3')" in message


def test_item_lists_and_scenarios_refuse_unusable_prices():
    for low, high in [(math.nan, 10.0), (5e-324, 10.0), (1.0, math.inf), (1.0, 2 * MAX_PRICE)]:
        with pytest.raises(ConfigError, match="price"):
            Item("x", "c", "d", low, high)
    with pytest.raises(ConfigError, match="above high"):
        Item("x", "c", "d", 20.0, 10.0)
    with pytest.raises(ConfigError, match="malformed"):
        Bargaining(
            catalog=[
                {"title": "x", "category": "c", "description": "", "low": 5e-324, "high": 1.0}
            ],
            split=None,
        )
    with pytest.raises(ConfigError, match="seller value"):
        Scenario(0, ITEM, math.nan, 100.0, "GFT")


def test_loader_drops_what_cocoa_drops_and_reads_several_files(tmp_path):
    first = tmp_path / "a.json"
    first.write_text(
        json.dumps(
            [
                {"title": "Free couch", "category": "furniture", "description": [], "price": 5},
                {"title": "Placeholder", "category": "phone", "description": [], "price": 1},
                {"title": "Unpriced", "category": "phone", "description": [], "price": 0},
                {
                    "title": "Desk",
                    "category": "furniture",
                    "description": [
                        "Solid oak.",
                        "Paid $450 new.",
                        "Was 300 dollars.",
                        "Pick up only.",
                    ],
                    "price": 120,
                },
            ]
        )
    )
    second = tmp_path / "b.json"
    second.write_text(json.dumps([{"title": "Bike", "category": "bike", "price": 6}]))
    items = load_craigslist([first, second])
    assert [(i.title, i.high) for i in items] == [("Desk", 120.0), ("Bike", 6.0)]
    assert items[0].description == "Solid oak. Pick up only."
    game = Bargaining(catalog=[str(first), str(second)], split=None)
    assert [i.title for i in game.items] == ["Desk", "Bike"]
    assert game.params["catalog"] == [str(first), str(second)]


@pytest.mark.parametrize("price", [2 * MAX_PRICE, 5e-324, math.nan, math.inf])
def test_code_built_turns_obey_the_price_cap(price):
    """Rule-based agents build ``Turn``s without the parser: the engine checks them too."""
    state = Bargaining([ITEM]).from_scenario(Scenario(0, ITEM, 80.0, 120.0, "GFT"), seed=1)
    turn = Turn((Call("make_offer", (("price", price),)), Call("wait_for_response")))
    assert state.apply({SELLER: turn}) is None
    assert state.correction is not None and "price" in state.correction
    assert state.offers[SELLER] == []


def _broken(index: int) -> Scenario:
    bad = Scenario(index, ITEM, 80.0, 120.0, "GFT")
    object.__setattr__(bad, "buyer_value", math.nan)  # what no loader can build any more
    return bad


def test_payoff_bounds_are_enforced_by_the_engine():
    state = Bargaining([ITEM]).from_scenario(_broken(0), seed=1)
    state.price = 100.0
    with pytest.raises(GameError, match="outside the payoff bounds"):
        state._result()


def test_one_broken_scenario_cannot_abort_a_tournament(tmp_path):
    game = Bargaining([ITEM], split=None)
    scenarios = [Scenario(i, ITEM, 80.0, 120.0, "GFT") for i in range(3)]
    scenarios[1] = _broken(1)
    agents = {
        "NaiveAccepter": get_strategy("bargaining", "NaiveAccepter"),
        "Linear": get_strategy("bargaining", "Linear"),
    }
    result = round_robin(game, agents, tmp_path / "run", count=3, scenarios=scenarios)
    lines = [json.loads(x) for x in (tmp_path / "run" / "traces.jsonl").read_text().splitlines()]
    assert len(lines) == 12
    failed = [x for x in lines if x["status"] != "complete"]
    assert failed and all(x["meta"]["index"] == 1 for x in failed)
    assert all("payoff bounds" in x["error"] for x in failed)
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["status"] == "partial" and manifest["errors"] == len(failed)
    assert result.errors == len(failed)


def test_a_run_stopped_by_an_exception_is_not_left_started(tmp_path):
    with pytest.raises(RuntimeError), RunFolder(tmp_path / "run", {"job": "x"}):
        raise RuntimeError("boom")
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["status"] == "error" and "boom" in manifest["error"]


def test_tournament_cli_refuses_a_nan_listing_in_one_line(tmp_path):
    path = _listings(tmp_path / "nan.json", math.nan)
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "stratagem"),
            "tournament",
            "--game",
            "bargaining",
            "--agents",
            "Boulware,Linear",
            "--catalog",
            str(path),
            "--split",
            "train",
            "--gft",
            "4",
            "--ngft",
            "2",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "nan.json: listing 3 ('Bike 3'): price nan is not finite" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "traces.jsonl").exists()


def test_each_side_is_told_when_it_plays_its_last_turn():
    from stratagem.games.bargaining.prompts import state_lines

    game = Bargaining([ITEM], max_rounds=4)
    state = game.from_scenario(Scenario(0, ITEM, 80.0, 120.0, "GFT"), seed=1)
    texts = []
    for price in (140.0, 90.0, 130.0):
        view = state.view(state.turn_seat)
        texts.append(" ".join(state_lines(view, state.turn_seat)))
        state.apply({state.turn_seat: Turn((Call("make_offer", (("price", price),)),))})
    texts.append(" ".join(state_lines(state.view(state.turn_seat), state.turn_seat)))
    assert "last" not in texts[0] and "last" not in texts[1]
    assert "This is your last turn: the buyer has the final round." in texts[2]  # the seller
    assert "This is the last round." in texts[3]  # the buyer
