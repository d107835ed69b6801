"""gen-sft: App. H counts, readable by `datasets`, legal final actions, deterministic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stratagem.games import get_game
from stratagem.parsing import parse_action
from stratagem.training.sft_data import DATASETS


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


def test_app_h_counts_and_split(data):
    for name, sizes in DATASETS.items():
        card = json.loads((data / name / "card.json").read_text())
        total = sum(sizes.values())
        assert card["examples"]["train"] + card["examples"]["test"] == total
        assert card["examples"]["test"] == round(0.2 * total)
        assert card["per_game"] == sizes
        assert card["assistant_chars"]["median"] < 100


def test_datasets_library_reads_it(data):
    from datasets import load_dataset

    ds = load_dataset(
        "json",
        data_files={"train": str(data / "kuhn/train.jsonl"), "test": str(data / "kuhn/test.jsonl")},
    )
    assert ds["train"].num_rows == 6400 and ds["test"].num_rows == 1600
    for row in ds["train"].select(range(50)):
        roles = [m["role"] for m in row["messages"]]
        # the seat's whole chat up to this decision: system, then user/assistant turns
        assert roles[0] == "system" and roles[-1] == "assistant" and len(roles) % 2 == 1
        assert roles[1:] == ["user", "assistant"] * ((len(roles) - 1) // 2)


def test_every_assistant_turn_ends_with_a_legal_action(data):
    for name in DATASETS:
        for line in (data / name / "train.jsonl").read_text().splitlines()[:3000]:
            row = json.loads(line)
            answer = row["messages"][-1]["content"]
            game = get_game(row["game"])
            # the legal tokens of that decision are listed in, or implied by, the prompt
            token = answer.strip().splitlines()[-1]
            assert token == row["action"]
            legal = (row["action"],) if game.name == "multi_issue" else _legal(game, row)
            assert parse_action(answer, legal).token == row["action"]


def _legal(game, row):
    if game.name == "kuhn":
        return ("PASS", "BET", "CALL", "FOLD")
    state = game.new_episode(0)
    return state.observe(0).legal


def test_demonstrations_never_face_the_robust_pool():
    from stratagem.strategies import get_pools
    from stratagem.training import sft_data

    seen = []
    original = sft_data.get_strategy

    def spy(game, name):
        import inspect

        if inspect.stack()[1].function == "game_examples":  # opponents, not demonstrators
            seen.append(name)
        return original(game, name)

    sft_data.get_strategy = spy
    try:
        list(sft_data.game_examples("ipd", 400))
    finally:
        sft_data.get_strategy = original
    robust = set(get_pools("ipd").robust)
    assert seen and not robust & set(seen)


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
