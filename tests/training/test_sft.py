"""LoRA SFT: per-turn loss masks (fast) and a two-step TRL run on the embedded model (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.slow
def test_two_steps_of_lora_sft_write_an_adapter_that_loads(tmp_path):
    from stratagem.backends.hf import HFBackend
    from stratagem.training.sft.data import write_dataset
    from stratagem.training.sft.trainer import SFTArgs, train_sft

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
    from stratagem.training.sft.data import write_dataset
    from stratagem.training.sft.trainer import SFTArgs, train_sft

    write_dataset("kuhn", tmp_path / "data", sizes={"kuhn": 10})
    with pytest.raises(ConfigError, match="no rows of ipd"):
        train_sft(SFTArgs(data=tmp_path / "data/kuhn", out=tmp_path / "run", games=("ipd",)))
    assert not (tmp_path / "run" / "adapter").exists()


def test_loss_covers_every_assistant_turn_and_nothing_else():
    from transformers import AutoTokenizer

    from stratagem.backends.embedded import embedded_dir
    from stratagem.training.sft.data import game_chats
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
    from stratagem.training.sft.data import game_chats
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


def test_a_starting_adapter_that_is_no_adapter_folder_is_refused(tmp_path):
    """The check every trainer's ``--adapter`` goes through (``args.check_adapters``)."""
    from stratagem.errors import ConfigError
    from stratagem.training.sft.trainer import SFTArgs

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("")
    (tmp_path / "empty").mkdir()
    for folder, why in (("nope", "no such adapter folder"), ("empty", "no adapter_config.json")):
        args = SFTArgs(data=tmp_path / "data", out=tmp_path / "run", adapter=str(tmp_path / folder))
        with pytest.raises(ConfigError, match=why):
            args.check()


def test_the_next_step_of_a_staged_sft_run_evaluates_the_whole_stack(tmp_path):
    from stratagem.cli.train import _next_steps
    from stratagem.training.sft.trainer import SFTArgs

    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    args = SFTArgs(data=tmp_path / "bargaining", adapter="runs/drills/adapter")
    (line,) = _next_steps(args, tmp_path / "adapter")
    assert line.endswith(f"--adapter runs/drills/adapter,{tmp_path / 'adapter'}")
    assert "--game bargaining " in line


def test_the_next_step_names_the_game_a_drills_folder_holds_not_its_name(tmp_path):
    from stratagem.cli.train import _next_steps
    from stratagem.training.sft.trainer import SFTArgs

    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    drills = tmp_path / "dond-drills"
    drills.mkdir()
    (drills / "card.json").write_text(json.dumps({"per_game": {"dond": 12}}))
    (line,) = _next_steps(SFTArgs(data=drills), tmp_path / "adapter")
    assert "--game dond " in line
    # a folder of several games, or a card that cannot be read: the game is left to fill in
    (drills / "card.json").write_text(json.dumps({"per_game": {"dond": 1, "ipd": 2}}))
    assert "--game GAME " in _next_steps(SFTArgs(data=drills), tmp_path / "adapter")[0]
    (drills / "card.json").write_text("{not json")
    assert "--game GAME " in _next_steps(SFTArgs(data=drills), tmp_path / "adapter")[0]


@pytest.mark.slow
def test_a_staged_run_starts_from_its_adapter_merged_into_the_weights(tmp_path, tiny_model):
    """A first run with a large step moves the weights; a second run from it (``adapter``) with a
    vanishing learning rate writes merged weights equal to the first run's, not the base's (on
    the tiny model: the same code path as the embedded one, in seconds)."""
    import torch
    from safetensors.torch import load_file

    from stratagem.training.sft.data import write_dataset
    from stratagem.training.sft.trainer import SFTArgs, train_sft

    write_dataset("kuhn", tmp_path / "data", sizes={"kuhn": 20})
    common = dict(
        data=tmp_path / "data/kuhn", batch_size=2, eval_examples=2, merge=True, model=tiny_model
    )
    # two steps: the warmup's first step has a learning rate of 0
    first = train_sft(SFTArgs(out=tmp_path / "a", learning_rate=1e-2, max_steps=2, **common))
    train_sft(
        SFTArgs(out=tmp_path / "b", learning_rate=1e-12, max_steps=1, adapter=str(first), **common)
    )
    start, staged = (load_file(tmp_path / run / "merged" / "model.safetensors") for run in "ab")
    base = load_file(Path(tiny_model) / "model.safetensors")
    name = next(k for k in start if "q_proj" in k)
    assert not torch.allclose(start[name], base[name], atol=1e-4)  # the first run moved it
    assert torch.allclose(staged[name], start[name], atol=1e-6)


def _folder(path, train, test, game="dond"):
    path.mkdir(parents=True)
    (path / "train.jsonl").write_text("".join(json.dumps({"id": r}) + "\n" for r in train))
    if test is not None:
        (path / "test.jsonl").write_text("".join(json.dumps({"id": r}) + "\n" for r in test))
    (path / "card.json").write_text(json.dumps({"per_game": {game: len(train)}}))
    return path


def test_several_data_folders_are_one_data_set_train_in_order_test_interleaved(tmp_path):
    """``--data A,B``: the train rows of A then B (what concatenating the files gives), the test
    rows one from each folder in turn, so the first eval examples hold both folders' chats."""
    from stratagem.training.sft.trainer import read_folders

    a = _folder(tmp_path / "a", ["a1", "a2", "a3"], ["at1", "at2", "at3"])
    b = _folder(tmp_path / "b", ["b1", "b2"], ["bt1"])
    c = _folder(tmp_path / "c", ["c1"], None)  # no test split: adds none
    train, test = read_folders([a, b, c])
    assert [r["id"] for r in train] == ["a1", "a2", "a3", "b1", "b2", "c1"]
    assert [r["id"] for r in test] == ["at1", "bt1", "at2", "at3"]
    train, test = read_folders([a])
    assert [r["id"] for r in train] == ["a1", "a2", "a3"] and len(test) == 3
    # the eval examples are cut from the interleaved rows: a cut of 2 holds both folders
    assert [r["id"] for r in read_folders([a, b, c], eval_examples=2)[1]] == ["at1", "bt1"]


def test_data_folders_come_comma_separated_and_each_is_checked(tmp_path):
    from stratagem.errors import ConfigError
    from stratagem.settings import build, choose
    from stratagem.training.sft.trainer import SFTArgs

    a = _folder(tmp_path / "a", ["a1"], None)
    b = _folder(tmp_path / "b", ["b1"], None)
    values = {k: v[0] for k, v in choose(SFTArgs, {"data": f"{a},{b}"}, None).items()}
    args = build(SFTArgs, values)
    assert args.folders == [a, b]
    args.check()
    assert args.data_game() == "dond"
    assert SFTArgs(data=a).folders == [a]  # one folder given directly
    _folder(tmp_path / "k", ["k1"], None, game="kuhn")
    assert SFTArgs(data=(a, tmp_path / "k")).data_game() is None  # two games: left to fill in
    with pytest.raises(ConfigError, match="missing holds no train.jsonl"):
        SFTArgs(data=(a, tmp_path / "missing")).check()
    with pytest.raises(ConfigError, match="names no folder"):
        build(SFTArgs, {"data": []}).check()
    with pytest.raises(ConfigError, match="more than once"):  # rows would weigh double
        SFTArgs(data=(a, b, tmp_path / "b" / ".." / "a")).check()


def test_a_rerun_with_other_settings_is_refused_before_any_weights_load(tmp_path, monkeypatch):
    """``out/run.json`` holds the settings' fingerprint: the same settings (a larger step budget
    too) resume, other data or another learning rate are refused in one line, and a folder
    another process trains into is refused."""
    from stratagem.errors import ConfigDriftError
    from stratagem.runs import RunFolder, RunLockedError
    from stratagem.training.sft import trainer as sft
    from stratagem.training.sft.data import write_dataset
    from stratagem.training.sft.trainer import SFTArgs, train_sft

    write_dataset("kuhn", tmp_path / "a", sizes={"kuhn": 6})
    write_dataset("kuhn", tmp_path / "b", sizes={"kuhn": 8})
    fits = []
    monkeypatch.setattr(sft, "_fit", lambda args, *rest: fits.append(args) or args.out / "adapter")
    out = tmp_path / "run"
    first = SFTArgs(data=tmp_path / "a/kuhn", out=out, max_steps=2)
    train_sft(first)
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
    train_sft(SFTArgs(data=tmp_path / "a/kuhn", out=out, max_steps=4, eval_steps=1))  # extended
    for other in ({"data": tmp_path / "b/kuhn"}, {"learning_rate": 1e-3}):
        settings = {"data": tmp_path / "a/kuhn", "out": out, **other}
        with pytest.raises(ConfigDriftError, match=f"{next(iter(other))}: .* -> "):
            train_sft(SFTArgs(**settings))
    assert len(fits) == 2  # the refused runs never reached the training
    with RunFolder(out, first.fingerprint()), pytest.raises(RunLockedError):
        train_sft(first)
    assert len(fits) == 2
