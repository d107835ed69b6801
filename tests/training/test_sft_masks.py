"""`train sft` carries no loss on refused answers nor on aborted games, for every game: checked
on tokenised rows, as `gen-sft` writes them and with the markers built by hand."""

from __future__ import annotations

import json

import pytest

from stratagem.episode import Episode
from stratagem.games import get_game
from stratagem.training.sft.trainer import chat_tokens, read_rows, token_rows
from stratagem.training.trl_config import IGNORE, refused_turns, tokenize_chat
from tests.training.test_selfplay import END, ScriptedSeats


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from stratagem.backends.embedded import embedded_dir

    return AutoTokenizer.from_pretrained(embedded_dir())


def learned(tokens: dict[str, list[int]]) -> list[int]:
    pairs = zip(tokens["input_ids"], tokens["labels"], strict=True)
    return [t for t, label in pairs if label != IGNORE]


def dond_row_as_gen_sft_writes_it(seat: int = 0) -> dict:
    """One seat of a scripted DoND game whose seat 0 first sends a malformed answer ("hello"),
    which the game sends back with a correction: the chat exactly as ``simulated_chats`` takes
    it from the episode (system, then the seat's user / assistant turns), no marker added."""
    game = get_game("dond")
    agent = ScriptedSeats(game)
    episode = Episode(game, "0", 3, ("script", "script"))
    while not episode.done:
        for obs in episode.waiting():
            episode.submit(obs.seat, agent.act([obs])[0])
        episode.step()
    turns = [m.to_dict() for m in episode.chat(seat)]
    return {"messages": [{"role": "system", "content": episode.rules(seat)}, *turns]}


def test_a_refused_dond_answer_in_a_gen_sft_chat_carries_no_loss(tokenizer):
    row = dond_row_as_gen_sft_writes_it()
    answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert answers[0] == "hello" and len(answers) == 3
    assert refused_turns(row["messages"]) == [True, False, False]
    tokens = chat_tokens(tokenizer, row, max_length=4096)
    assert tokenizer.decode(learned(tokens)) == "".join(a + END for a in answers[1:])
    # the refused answer stays in the context, at positions whose labels are the ignore index
    everything = tokenize_chat(tokenizer, row["messages"], max_length=4096)
    assert everything["input_ids"] == tokens["input_ids"]
    pairs = zip(everything["labels"], tokens["labels"], strict=True)
    changed = [i for i, (a, b) in enumerate(pairs) if a != b]
    assert tokenizer.decode([tokens["input_ids"][i] for i in changed]) == "hello" + END
    assert all(tokens["labels"][i] == IGNORE for i in changed)


def test_marked_refusals_and_aborted_games_carry_no_loss_in_every_layout(tokenizer):
    # a bargaining-like chat: the refused answer got the game's fallback move, no correction
    messages = [
        {"role": "system", "content": "You sell a bike."},
        {"role": "user", "content": "Round 1: post your listing."},
        {"role": "assistant", "content": "Thought: list high.\nCode: make_offer(price=)"},
        {"role": "user", "content": "Round 3: the buyer offers $80."},
        {"role": "assistant", "content": "Thought: counter.\nCode: make_offer(price=120)"},
    ]
    assert refused_turns(messages) == [False, False]
    messages[2] = {**messages[2], "refused": True}
    assert refused_turns(messages) == [True, False]
    row = {"messages": messages, "game": "bargaining"}
    tokens = chat_tokens(tokenizer, row, max_length=4096)
    assert tokenizer.decode(learned(tokens)) == messages[4]["content"] + END
    refused_ids = tokenizer(messages[2]["content"], add_special_tokens=False).input_ids
    text_ids = tokens["input_ids"]
    at = next(i for i in range(len(text_ids)) if text_ids[i : i + len(refused_ids)] == refused_ids)
    assert set(tokens["labels"][at : at + len(refused_ids)]) == {IGNORE}

    aborted = {**row, "aborted": True}
    assert learned(chat_tokens(tokenizer, aborted, max_length=4096)) == []
    assert token_rows(tokenizer, [row, aborted], 4096) == [tokens]  # no row without a target

    # gen-sft --turns: the refused completion is no target; an accepted one is
    refused_turn = {"prompt": messages[:2], "completion": [messages[2]], "game": "bargaining"}
    accepted_turn = {"prompt": messages[:4], "completion": [messages[4]], "game": "bargaining"}
    assert learned(chat_tokens(tokenizer, refused_turn, max_length=4096)) == []
    assert tokenizer.decode(learned(chat_tokens(tokenizer, accepted_turn, 4096))) == (
        messages[4]["content"] + END
    )


def test_rows_are_read_with_markers_some_rows_lack(tmp_path):
    rows = [
        {"messages": [{"role": "user", "content": "a"}], "game": "dond"},
        {"messages": [{"role": "assistant", "content": "b", "refused": True}], "game": "dond"},
        {"messages": [{"role": "user", "content": "c"}], "game": "ipd", "aborted": True},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_rows(path) == rows
    assert read_rows(path, ("ipd",)) == rows[2:]


def test_flags_must_match_the_assistant_turns(tokenizer):
    row = dond_row_as_gen_sft_writes_it()
    with pytest.raises(ValueError, match="2 flags for 3 assistant turns"):
        tokenize_chat(tokenizer, row["messages"], 4096, trained=[True, True])


def test_a_flawed_drill_claim_carries_no_loss_as_gen_sft_writes_it(tokenizer, tmp_path):
    from experiments.drills import drills
    from stratagem.training.sft.data import write_chats

    chats = list(drills("dond", 40, seed=5, joint=True, flawed=True))
    write_chats("dond-drills", chats, tmp_path, seed=0)
    rows = read_rows(tmp_path / "dond-drills" / "train.jsonl")
    row = next(r for r in rows if any(m.get("refused") for m in r["messages"]))
    answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert refused_turns(row["messages"]) == [True] + [False] * (len(answers) - 1)
    tokens = chat_tokens(tokenizer, row, max_length=4096)
    # the flawed claim stays in the context only; the deal and proposal after it are learned
    assert tokenizer.decode(learned(tokens)) == "".join(a + END for a in answers[1:])
    assert answers[0] in tokenizer.decode(tokens["input_ids"])
