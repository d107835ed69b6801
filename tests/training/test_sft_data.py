"""gen-sft: one chat per (episode, seat), App. H sizes in decisions, readable by `datasets`,
legal actions on every assistant turn, opponents from the training pools only, deterministic."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from stratagem.games import get_game
from stratagem.parsing import parse_action
from stratagem.strategies import get_pools
from stratagem.training.sft.data import DATASETS, game_chats


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
    from stratagem.training.sft.data import simulated_chats, write_chats

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


def test_dond_demonstrations_never_show_a_context_their_seed_holds_out(demonstrated_contexts):
    """`gen-sft --game dond --seed S` plays on the training side of split_contexts(contexts, S),
    whose held-out side `train selfplay --seed S` evaluates on (about a tenth of the contexts:
    160 games drawn from all of them would show ~16)."""
    from stratagem.games.dond import all_contexts, split_contexts
    from stratagem.training.sft import data as sft_data

    played = demonstrated_contexts
    for seed in (42, 3):
        played.clear()
        chats = list(sft_data.simulated_chats("dond", ["FairSplit", "ValueGreedy"], 80, seed=seed))
        assert len(chats) == 320 and len(played) == 160
        held_out = set(split_contexts(all_contexts(), seed).held_out)
        assert len(set(played)) > 100 and not set(played) & held_out
        # the chats are those contexts' games: each states a seat's values of one of them
        seat_views = {(ctx.counts, values) for ctx in played for values in ctx.values}
        for chat in chats:
            rules = chat.messages[0]["content"]
            counts = tuple(map(int, POOL.search(rules).groups()))
            assert (counts, tuple(map(int, VALUES.search(rules).groups()))) in seat_views


POOL = re.compile(r"items: (\d+) books?, (\d+) hats? and (\d+) balls?\.")
VALUES = re.compile(r"Your values: a book is worth (\d+), a hat (\d+) and a ball (\d+)")


def _rows(folder) -> list[dict]:
    return [json.loads(x) for split in ("train", "test") for x in open(folder / f"{split}.jsonl")]


def test_gen_sft_filters_failed_games_and_includes_self_pairings(tmp_path):
    """On the command line: self-pairings by default, --agreements-only and --min-score keep only
    the chats of agreements / of seats that scored enough, as the written JSONL shows."""

    def gen_sft(out, *extra):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "stratagem.cli.main",
                "gen-sft",
                "--game",
                "dond",
                "--agents",
                "FairSplit,ValueGreedy,Stubborn",
                "-n",
                "4",
                "-p",
                "max_turns=6",
                "--out",
                str(tmp_path / out),
                *extra,
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr
        return _rows(tmp_path / out / "dond")

    every = gen_sft("all")
    assert len(every) == 3 * 3 * 4 * 2  # 9 ordered pairs (3 self-pairings) × 4 episodes × 2 seats
    assert {(r["strategy"], r["opponent"]) for r in every} >= {("Stubborn", "Stubborn")}
    assert sum(r["strategy"] == r["opponent"] for r in every) == 3 * 4 * 2
    failed = [r for r in every if not r["agreement"]]
    assert failed and all(r["score"] == 0 for r in failed)  # Stubborn against itself, at least
    agreed = gen_sft("agreed", "--agreements-only")
    assert agreed and all(r["agreement"] for r in agreed)
    assert len(agreed) == len(every) - len(failed)
    rich = gen_sft("rich", "--min-score", "6")
    assert rich and all(r["score"] >= 6 for r in rich)
    assert len(rich) == sum(r["score"] >= 6 for r in every)
    apart = gen_sft("apart", "--no-self-play")
    assert len(apart) == 6 * 4 * 2 and all(r["strategy"] != r["opponent"] for r in apart)


def test_the_demonstration_filter_refuses_games_without_agreements():
    from stratagem.errors import ConfigError
    from stratagem.training.sft.data import demonstration_filter, simulated_chats

    assert demonstration_filter() is None
    keep = demonstration_filter(agreements_only=True)
    with pytest.raises(ConfigError, match="records no agreement"):
        list(simulated_chats("ipd", ["TitForTat"], 1, keep=keep))


BARGAINERS = ["Boulware", "Linear", "Conceder", "TitForTatConcession"]


def test_bargaining_demonstrations_are_tool_calls_the_games_parser_accepts():
    from stratagem.games.bargaining import Turn
    from stratagem.training.sft.data import simulated_chats

    game = get_game("bargaining")
    chats = list(simulated_chats("bargaining", BARGAINERS, 2, seed=3))
    assert len(chats) == 4 * 3 * 2 * 2  # ordered pairs × episodes × seats
    answers = 0
    for chat in chats:
        roles = [m["role"] for m in chat.messages]
        assert roles[1:] == ["user", "assistant"] * chat.decisions
        for message, action in zip(chat.messages[2::2], chat.actions, strict=True):
            turn = game.parse(message["content"])
            assert isinstance(turn, Turn), turn  # every assistant turn parses
            assert game.token(turn) == action  # ... to the turn that was played
            assert message["content"].startswith(f"Thought: {turn.thought}\nCode:\n```py\n")
            assert turn.thought and turn.thought != "my move"
            answers += 1
    assert answers == sum(c.decisions for c in chats) > 200
    assert any("respond_to_offer(response=True)" in a for c in chats for a in c.actions)


def test_turn_rows_strip_think_from_contexts_and_keep_it_in_targets():
    from stratagem.training.sft.data import Chat, strip_think

    visible = "Thought: open high\nCode:\n```py\nmake_offer(price=9)\n```"
    first = f"<think>I could ask more.</think>\n{visible}"
    second = "<think>unclosed reasoning ```py\nquit_negotiation()\n```"
    chat = Chat(
        "bargaining",
        "hf",
        "Boulware",
        ("make_offer(price=9.0)", "invalid: no code block"),
        [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "list it"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "<think> in a user turn is data"},
            {"role": "assistant", "content": second},
        ],
    )
    one, two = chat.turn_rows()
    assert one["prompt"] == chat.messages[:2] and one["completion"] == [chat.messages[2]]
    assert (one["action"], one["turn"], two["turn"]) == ("make_offer(price=9.0)", 0, 1)
    assert two["prompt"] == [
        *chat.messages[:2],
        {"role": "assistant", "content": visible},
        chat.messages[3],  # only answers are stripped
    ]
    assert two["completion"] == [{"role": "assistant", "content": second}]  # kept whole
    assert strip_think(second) == "" and strip_think("no reasoning ") == "no reasoning "
    assert chat.row()["messages"][2]["content"] == first  # whole chats keep every target whole


def test_gen_sft_turns_writes_prompt_completion_rows_that_datasets_reads(tmp_path):
    from datasets import load_dataset

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "stratagem.cli.main",
            "gen-sft",
            "--game",
            "bargaining",
            "--agents",
            "Boulware,Conceder",
            "-n",
            "3",
            "--turns",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    card = json.loads((tmp_path / "bargaining/card.json").read_text())
    # 2 ordered pairs and 2 self-pairings (on by default) × 3 episodes × 2 seats = 24 chats
    assert card["layout"] == "turns" and card["chats"] == {"test": 5, "train": 19}
    ds = load_dataset("json", data_files=str(tmp_path / "bargaining/train.jsonl"))["train"]
    assert ds.num_rows == card["decisions"]["train"]
    game = get_game("bargaining")
    for row in ds:
        assert row["prompt"][0]["role"] == "system" and row["prompt"][-1]["role"] == "user"
        assert len(row["prompt"]) == 2 + 2 * row["turn"]
        answer = row["completion"][0]["content"]
        assert game.token(game.parse(answer)) == row["action"]
