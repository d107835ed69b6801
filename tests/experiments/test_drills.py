"""Comparison drills: real one-decision bargaining chats whose answer is the reservation-price
responder's, whose relation word is right, and which `python -m experiments.drills` writes;
games without drills are refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.drills import drills
from experiments.drills.bargaining import comparison_drills
from stratagem.games.bargaining import Bargaining
from stratagem.games.bargaining.catalog import builtin_catalog, scenarios
from stratagem.games.bargaining.prompts import role_text, system_prompt

ROOT = Path(__file__).resolve().parents[2]
ANSWER = re.compile(r"offers \$([\d.]+); my reservation value is \$([\d.]+), so the offer is (\w+)")


def test_every_drill_is_a_right_comparison_answered_as_the_responder_would():
    game, seen = Bargaining(), set()
    for chat in comparison_drills(400, seed=7):
        system, user, answer = (m["content"] for m in chat.messages)
        seller = system.startswith("You are the SELLER")
        value = float(re.search(r"reservation value is \$([\d.]+)", system).group(1))
        offered = float(re.search(r"Open offer from the \w+: \$([\d.]+)\.", user).group(1))
        price, quoted, relation = ANSWER.search(answer).groups()
        assert (float(price), float(quoted)) == (offered, value)  # both copied, not invented
        truth = "lower" if offered < value else "higher" if offered > value else "the"
        assert relation == truth
        assert 0.7 <= offered / value <= 1.3
        turn = game.parse(answer)  # the game reads it back as the responder's decision
        accepts = [c.render() for c in turn.calls] == ["respond_to_offer(response=True)"]
        assert accepts == (offered >= value if seller else offered <= value)
        if not accepts:
            assert [c.render() for c in turn.calls] == [
                "respond_to_offer(response=False)",
                "wait_for_response()",
            ]
        round_ = int(re.match(r"Round (\d+) of 10\.", user).group(1))
        assert round_ % 2 == (1 if seller else 0) and round_ >= 2
        seen.add((seller, accepts, relation))
    # both roles, both decisions, and offers equal to the value all occur
    assert {(s, a) for s, a, _ in seen} == {
        (True, True),
        (True, False),
        (False, True),
        (False, False),
    }
    assert any(r == "the" for *_, r in seen)


def test_the_drills_system_turn_is_the_games_own_role_sentence():
    s = scenarios(builtin_catalog(), gft=1, ngft=0)[0]
    for seat, value in ((0, s.seller_value), (1, s.buyer_value)):
        assert role_text(seat, value) in system_prompt(s, seat, 10, guide=False)


def test_drills_are_seeded():
    first = [c.messages for c in comparison_drills(20, seed=3)]
    assert first == [c.messages for c in comparison_drills(20, seed=3)]
    assert first != [c.messages for c in comparison_drills(20, seed=4)]


def test_the_drills_command_writes_both_games_and_refuses_others(tmp_path):
    def gen_sft(*args):
        return subprocess.run(
            [sys.executable, "-m", "experiments.drills", "-o", str(tmp_path), *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )

    r = gen_sft("--game", "bargaining", "--drills", "50")
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "bargaining-drills"
    rows = [json.loads(x) for f in ("train", "test") for x in open(folder / f"{f}.jsonl")]
    assert len(rows) == 50 and {r["opponent"] for r in rows} == {"drill"}
    assert json.loads((folder / "card.json").read_text())["chats"] == {"train": 40, "test": 10}
    assert not (tmp_path / "bargaining").exists()  # drills only

    r = gen_sft(
        "--game", "bargaining", "--drills", "4", "--drills-in-game", "-o", str(tmp_path / "g")
    )
    assert r.returncode == 0, r.stderr
    row = json.loads(open(tmp_path / "g" / "bargaining-drills" / "train.jsonl").readline())
    assert "Tools:" in row["messages"][0]["content"]

    r = gen_sft("--game", "dond", "--drills", "20", "-o", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "d" / "dond-drills"
    rows = [json.loads(x) for f in ("train", "test") for x in open(folder / f"{f}.jsonl")]
    assert len(rows) == 20 and {r["opponent"] for r in rows} == {"drill"}
    assert all(r["agreement"] for r in rows)
    assert not (tmp_path / "d" / "dond").exists()  # drills only

    r = gen_sft("--game", "dond", "--drills", "40", "--drills-refuse", "-o", str(tmp_path / "r"))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in open(tmp_path / "r" / "dond-drills" / "train.jsonl")]
    assert any("and that leaves me none" in m["content"] for r in rows for m in r["messages"])
    r = gen_sft("--game", "dond", "--drills", "4", "--drills-joint", "-o", str(tmp_path / "j"))
    assert r.returncode == 0, r.stderr
    rows = [
        json.loads(x)
        for f in ("train", "test")
        for x in open(tmp_path / "j/dond-drills" / f"{f}.jsonl")
    ]
    # both seats' chats hold the claimant's stated values: its opening, or the claim it read
    opening = [" ".join(m["content"] for m in r["messages"][1:3]) for r in rows]
    assert rows and all("a book is worth" in text for text in opening)
    both = ("--drills-refuse", "--drills-joint")
    r = gen_sft("--game", "dond", "--drills", "4", *both, "-o", str(tmp_path / "rj"))
    assert r.returncode != 0 and "two kinds of dond drills" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr and not (tmp_path / "rj").exists()

    r = gen_sft("--game", "ipd", "--drills", "5")
    assert r.returncode != 0
    assert "no drills for --game ipd; games with drills: bargaining, dond" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "ipd-drills").exists() and not (tmp_path / "ipd").exists()

    r = gen_sft("--drills", "5")
    assert r.returncode != 0 and "--drills needs --game" in r.stderr + r.stdout

    # a drill option without --drills would be silently ignored: refused, nothing written
    for option in (["--drills-far", "0.5"], ["--drills-in-game"], ["--drills-refuse"]):
        out = tmp_path / "none"
        r = gen_sft("--game", "dond", *option, "-o", str(out))
        assert r.returncode != 0 and "need --drills N" in r.stderr + r.stdout
        assert "Traceback" not in r.stderr and not out.exists()
    assert "Traceback" not in r.stderr


def test_far_drills_offer_up_to_four_times_away_and_are_still_answered_right():
    far = near = 0
    for chat in comparison_drills(400, seed=5, far=0.5):
        answer = chat.messages[2]["content"]
        price, value, relation = ANSWER.search(answer).groups()
        ratio = float(price) / float(value)
        assert 1 / 4.01 <= ratio <= 4.01
        if ratio != 1:
            assert relation == ("lower" if ratio < 1 else "higher")
        far += not 0.7 <= ratio <= 1.3
        near += 0.7 <= ratio <= 1.3
    assert 150 <= far <= 250 and near >= 150  # about half of the 400 are far


def test_without_far_drills_the_draws_are_those_of_before():
    """``far`` 0 spends no draw on it: the first drills of a seed stay what they were."""
    first = next(comparison_drills(1, seed=42, far=0.0)).messages[1]["content"]
    assert "Open offer from the buyer: $475.53." in first  # seed 42's first drill, as written


def test_in_game_drills_answer_inside_the_games_own_prompts_on_train_items():
    from stratagem.games.bargaining.catalog import split

    train = {item.title for item in split(builtin_catalog())["train"]}
    roles = set()
    for chat in drills("bargaining", 60, seed=11, far=0.5, in_game=True):
        system, *turns = chat.messages
        seller = "You are the SELLER" in system["content"]
        assert "Tools:" in system["content"] and "habits of good negotiators" in system["content"]
        title = re.search(r"Item: (.+?) \(", system["content"]).group(1)
        assert title in train  # never a validation or test item
        value = float(re.search(r"reservation value is \$([\d.]+)", system["content"]).group(1))
        answer = turns[-1]["content"]
        assert [t["role"] for t in turns] == ["user", "assistant"] * (2 if seller else 1)
        assert turns[-2]["content"].startswith("t=")  # the game's event line before the state
        round_ = int(re.search(r"Round (\d+) of 10\.", turns[-2]["content"]).group(1))
        assert round_ == (3 if seller else 2)
        price, quoted, relation = ANSWER.search(answer).groups()
        assert float(quoted) == value
        truth = "lower" if float(price) < value else "higher" if float(price) > value else "the"
        assert relation == truth
        accepts = "respond_to_offer(response=True)" in answer
        assert accepts == (float(price) >= value if seller else float(price) <= value)
        assert len(chat.actions) == (2 if seller else 1)
        roles.add((seller, accepts))
    assert roles == {(True, True), (True, False), (False, True), (False, False)}
    first = [c.messages for c in drills("bargaining", 4, seed=11, in_game=True)]
    assert first == [c.messages for c in drills("bargaining", 4, seed=11, in_game=True)]


def test_in_game_drills_with_later_answers_refuse_losing_offers_then_answer_the_last():
    """``answers`` K: each drill ends at its k-th answer to an offer (k from 1 to K, every k
    occurs); the k − 1 offers before it lose the responder money, nearing its value, and every
    one of them is refused with the right word; the last is answered by the rule."""
    from stratagem.errors import ConfigError

    ks = set()
    for chat in drills("bargaining", 80, seed=13, far=0.5, in_game=True, answers=4):
        system = chat.messages[0]["content"]
        seller = "You are the SELLER" in system
        value = float(re.search(r"reservation value is \$([\d.]+)", system).group(1))
        said = [m["content"] for m in chat.messages if m["role"] == "assistant"]
        replies = [ANSWER.search(a).groups() for a in said if "offers $" in a]
        k = len(replies)
        ks.add(k)
        assert len(chat.actions) == len(said) == k + (1 if seller else 0)
        offers = [float(price) for price, _, _ in replies]
        for j, (price, quoted, relation) in enumerate(replies):
            p = float(price)
            assert float(quoted) == value
            truth = "lower" if p < value else "higher" if p > value else "the"
            assert relation == truth
            accepts = "respond_to_offer(response=True)" in said[j + (1 if seller else 0)]
            assert accepts == (p >= value if seller else p <= value)
            if j < k - 1:  # an earlier offer loses money, and the offers near the value
                assert not accepts and (p < value if seller else p > value)
                assert abs(offers[j + 1] - value) <= abs(p - value) or j == k - 2
        turns = chat.messages[1:]
        assert [t["role"] for t in turns] == ["user", "assistant"] * len(said)
        rounds = [int(re.search(r"Round (\d+) of 10\.", t["content"]).group(1)) for t in turns[::2]]
        assert rounds == ([1, 3, 5, 7, 9] if seller else [2, 4, 6, 8])[: len(said)]
    assert ks == {1, 2, 3, 4}
    once = [c.messages for c in drills("bargaining", 6, seed=13, in_game=True)]
    assert once == [c.messages for c in drills("bargaining", 6, seed=13, in_game=True, answers=1)]
    # one answer spends no draw on k: seed 42's in-game drills are the ones written before
    last = [c.messages[-1]["content"] for c in drills("bargaining", 3, seed=42, in_game=True)]
    assert "The buyer offers $76.13; my reservation value is $81.84" in last[0]
    assert "The seller offers $435.73; my reservation value is $419.96" in last[1]
    assert "The buyer offers $253.70; my reservation value is $253.70" in last[2]
    with pytest.raises(ConfigError, match="--drills-answers needs --drills-in-game"):
        drills("bargaining", 4, seed=1, answers=2)
    with pytest.raises(ConfigError, match="room for 4"):
        drills("bargaining", 4, seed=1, in_game=True, answers=5)
    with pytest.raises(ConfigError, match="--drills-answers is for --game bargaining"):
        drills("dond", 4, seed=1, answers=2)
    with pytest.raises(ConfigError, match="--drills-farr: no such drill option"):
        drills("bargaining", 4, seed=1, farr=0.5)
    assert len(list(drills("dond", 2, seed=1, far=0.0))) == 2  # a default is no option set


def test_drill_settings_name_the_options_a_games_drills_take():
    from experiments.drills import DrillSettings
    from stratagem.errors import ConfigError

    assert DrillSettings(drills=5).drill_options() == {}
    chosen = DrillSettings(drills=5, drills_far=0.5, drills_in_game=True, drills_answers=3)
    assert chosen.drill_options() == {"far": 0.5, "in_game": True, "answers": 3}
    with pytest.raises(ConfigError, match="--drills-refuse: drill options need --drills N"):
        DrillSettings(drills_refuse=True).drill_options()
