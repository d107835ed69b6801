"""gen-sft: one chat per (episode, seat), App. H sizes in decisions, readable by `datasets`,
legal actions on every assistant turn, opponents from the training pools only, deterministic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stratagem.games import get_game
from stratagem.parsing import parse_action
from stratagem.strategies import get_pools
from stratagem.training.sft_data import DATASETS, game_chats


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    r = subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", "gen-sft", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return out


def test_app_h_sizes_in_decisions_and_an_80_20_split_of_chats(data):
    for name, sizes in DATASETS.items():
        card = json.loads((data / name / "card.json").read_text())
        assert sum(card["decisions"].values()) == sum(sizes.values())
        assert card["per_game"] == sizes
        chats = sum(card["chats"].values())
        assert card["chats"]["test"] == round(0.2 * chats)
        assert card["assistant_chars"]["median"] < 100


def test_datasets_library_reads_whole_chats(data):
    from datasets import load_dataset

    files = {"train": str(data / "kuhn/train.jsonl"), "test": str(data / "kuhn/test.jsonl")}
    ds = load_dataset("json", data_files=files)
    card = json.loads((data / "kuhn/card.json").read_text())
    assert ds["train"].num_rows == card["chats"]["train"]
    for row in ds["train"].select(range(50)):
        roles = [m["role"] for m in row["messages"]]
        # one episode of the demonstrator: system, then user / assistant turns
        assert roles[0] == "system" and roles[-1] == "assistant"
        assert roles[1:] == ["user", "assistant"] * len(row["actions"])


def test_ipd_chats_are_whole_episodes():
    chats = list(game_chats("ipd", 80))
    assert [c.decisions for c in chats] == [8] * 10
    assert all(c.messages[1]["content"].startswith("Round 1 of 8") for c in chats)


def test_every_assistant_turn_ends_with_its_legal_action(data):
    for name in DATASETS:
        for line in (data / name / "train.jsonl").read_text().splitlines()[:400]:
            row = json.loads(line)
            game = get_game(row["game"])
            answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
            assert len(answers) == len(row["actions"])
            for answer, action in zip(answers, row["actions"], strict=True):
                assert answer.strip().splitlines()[-1] == action
                legal = (action,) if game.name == "multi_issue" else _legal(game)
                assert parse_action(answer, legal).token == action


def _legal(game):
    if game.name == "kuhn":
        return ("PASS", "BET", "CALL", "FOLD")
    return game.new_episode(0).observe(0).legal


@pytest.mark.parametrize("game", ["ipd", "kuhn", "auction"])
def test_opponents_come_from_the_training_pools_only(game):
    pools = get_pools(game)
    allowed = set(pools.train) | set(pools.exploit) | set(pools.collusive)
    seen = {c.opponent for c in game_chats(game, 600)}
    assert seen <= allowed and not seen & (set(pools.robust) - allowed)
    assert len(seen) > 1


def test_same_seed_identical_files(tmp_path, data):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "stratagem.cli.main",
            "gen-sft",
            "--out",
            str(tmp_path),
            "--datasets",
            "kuhn",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "kuhn/train.jsonl").read_bytes() == (data / "kuhn/train.jsonl").read_bytes()


def test_simulated_chats_are_each_seats_dialogue_in_both_seats(tmp_path):
    from stratagem.training.sft_data import simulated_chats, write_chats

    chats = list(simulated_chats("dond", ["FairSplit", "ValueGreedy"], 3, seed=7))
    # 2 ordered pairs × 3 episodes × 2 seats, every one a demonstration
    assert len(chats) == 12
    assert {(c.strategy, c.opponent) for c in chats} == {
        ("FairSplit", "ValueGreedy"),
        ("ValueGreedy", "FairSplit"),
    }
    for c in chats:
        roles = [m["role"] for m in c.messages]
        assert roles[0] == "system" and "negotiating" in c.messages[0]["content"]
        assert roles[1:] == ["user", "assistant"] * c.decisions
        assert all(m["content"].startswith("[") for m in c.messages[2::2])
    again = list(simulated_chats("dond", ["FairSplit", "ValueGreedy"], 3, seed=7))
    assert [c.messages for c in again] == [c.messages for c in chats]  # seeded
    only = list(
        simulated_chats(
            "dond", ["FairSplit", "ValueGreedy"], 3, seed=7, demonstrators=["FairSplit"]
        )
    )
    assert len(only) == 6 and {c.strategy for c in only} == {"FairSplit"}
    card = write_chats("dond", chats, tmp_path, seed=7)
    assert card["chats"] == {"test": 2, "train": 10}
    assert sum(1 for _ in open(tmp_path / "dond/train.jsonl")) == 10
