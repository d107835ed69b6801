"""LoRA SFT: per-turn loss masks (fast) and a two-step TRL run on the embedded model (slow)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_two_steps_of_lora_sft_write_an_adapter_that_loads(tmp_path):
    from stratagem.backends.hf import HFBackend
    from stratagem.training.sft import SFTArgs, train_sft
    from stratagem.training.sft_data import write_dataset

    write_dataset("kuhn", tmp_path / "data", sizes={"kuhn": 60})
    adapter = train_sft(
        SFTArgs(
            data=tmp_path / "data/kuhn",
            out=tmp_path / "run",
            max_steps=2,
            batch_size=2,
            eval_steps=2,
            save_steps=2,
            eval_examples=4,
        )
    )
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 32 and config["lora_alpha"] == 64
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    backend = HFBackend(adapter=str(adapter))
    assert backend.model_id.endswith(str(adapter))


@pytest.mark.slow
def test_a_game_filter_that_matches_nothing_is_refused(tmp_path):
    from stratagem.errors import ConfigError
    from stratagem.training.sft import SFTArgs, train_sft
    from stratagem.training.sft_data import write_dataset

    write_dataset("kuhn", tmp_path / "data", sizes={"kuhn": 10})
    with pytest.raises(ConfigError, match="no rows of ipd"):
        train_sft(SFTArgs(data=tmp_path / "data/kuhn", out=tmp_path / "run", games=("ipd",)))
    assert not (tmp_path / "run" / "adapter").exists()


def test_loss_covers_every_assistant_turn_and_nothing_else():
    from transformers import AutoTokenizer

    from stratagem.backends.embedded import embedded_dir
    from stratagem.training.sft_data import game_chats
    from stratagem.training.trl_config import IGNORE, tokenize_chat

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    chat = next(game_chats("ipd", 8))
    out = tokenize_chat(tokenizer, chat.messages, max_length=4096)
    ids, labels = out["input_ids"], out["labels"]
    full = tokenizer.apply_chat_template(chat.messages, tokenize=False)
    assert tokenizer.decode(ids) == full  # the turns put together are the whole chat
    spans, current = [], []
    for token, label in zip(ids, labels, strict=True):
        if label != IGNORE:
            assert label == token
            current.append(token)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    spans.append(tokenizer.decode(current))
    answers = [m["content"] for m in chat.messages if m["role"] == "assistant"]
    assert spans == [f"{a}<|im_end|>\n" for a in answers]  # each answer and its end of turn
    short = tokenize_chat(tokenizer, chat.messages, max_length=100)
    assert len(short["input_ids"]) == len(short["labels"]) == 100


def test_a_turn_row_trains_its_completion_only():
    from transformers import AutoTokenizer

    from stratagem.backends.embedded import embedded_dir
    from stratagem.training.sft_data import game_chats
    from stratagem.training.trl_config import IGNORE, tokenize_chat

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    chat = next(game_chats("ipd", 8))
    rows = chat.turn_rows()
    last = rows[2]
    messages = last["prompt"] + last["completion"]
    every = tokenize_chat(tokenizer, messages, max_length=4096)
    only = tokenize_chat(tokenizer, messages, max_length=4096, targets="last")
    assert only["input_ids"] == every["input_ids"]
    trained = [
        t for t, label in zip(only["input_ids"], only["labels"], strict=True) if label != IGNORE
    ]
    assert tokenizer.decode(trained).startswith(last["completion"][0]["content"])
    # the earlier answers in the prompt are targets of the whole chat, not of the turn row
    assert sum(x != IGNORE for x in every["labels"]) > sum(x != IGNORE for x in only["labels"])
