"""LoRA SFT with TRL (SPEC §5): ``stratagem train sft``.

TRL's ``SFTTrainer`` with a PEFT LoRA adapter on the attention projections of the language model
only (rank 32, α 64, dropout 0.05), cosine schedule with 5 % warmup, an eval split and
checkpoints. Each row is one multi-turn chat (one episode of one demonstrator); the loss covers
**every accepted assistant turn** and nothing else (``trl_config.tokenize_chat``). Answers the
game refused stay in the context without loss, and a chat of an aborted game carries no loss at
all, so it is left out (SPEC §7; ``chat_tokens`` says how rows mark them). ``--adapter`` starts
from earlier SFT runs (merged into the weights under the new LoRA), for staged recipes such as
comparison drills, then whole negotiations; evaluate the result as the stack
``--adapter START,OUT/adapter``.

Departures from the paper, on purpose: the CPU demo raises the learning rate (2e-4 instead of
2e-5) and caps the steps, so that a few hundred steps teach the answer format; the GPU recipe
keeps the paper's settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import zip_longest
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.runs import RunFolder
from stratagem.training.policy import merge_adapters, model_path
from stratagem.training.sft.args import SFTArgs
from stratagem.training.trl_config import IGNORE, refused_turns, sft_config, tokenize_chat


def chat_tokens(tokenizer: Any, row: Mapping[str, Any], max_length: int) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` of one ``gen-sft`` row, cut at ``max_length`` tokens.

    A ``messages`` row (a whole chat) is trained on every assistant turn; a ``prompt`` /
    ``completion`` row (``gen-sft --turns``) on its completion only. Either way an answer the
    game refused carries no loss (``trl_config.refused_turns``: the message's ``"refused":
    true``, or a correction right after it), and a row marked ``"aborted": true`` (a game the
    rules aborted, e.g. Deal or No Deal after five refused answers in a row) carries none at all.
    """
    if row.get("messages"):
        messages, targets = list(row["messages"]), "all"
    else:
        messages, targets = list(row["prompt"]) + list(row["completion"]), "last"
    aborted = bool(row.get("aborted"))
    trained = [not (refused or aborted) for refused in refused_turns(messages)]
    return tokenize_chat(tokenizer, messages, max_length, targets=targets, trained=trained)


def read_rows(path: Path, games: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The JSONL rows of ``path`` (of ``games`` only, when given), read as plain JSON: rows may
    carry markers (``refused``, ``aborted``) that some rows lack, which a columnar loader would
    have to reconcile."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if not games or row.get("game") in games:
                    rows.append(row)
    return rows


def read_folders(
    folders: list[Path], games: tuple[str, ...] = (), eval_examples: int | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The train and test rows of several data folders as one data set: the train rows folder
    after folder (the trainer shuffles them), the test rows interleaved one from each folder in
    turn and cut to the first ``eval_examples`` (all when None), so that a cut holds every
    folder's chats. A folder without ``test.jsonl`` adds no test rows."""
    train = [row for folder in folders for row in read_rows(folder / "train.jsonl", games)]
    splits = [
        read_rows(folder / "test.jsonl", games)
        for folder in folders
        if (folder / "test.jsonl").exists()
    ]
    test = [row for turn in zip_longest(*splits) for row in turn if row is not None]
    return train, test[:eval_examples]


def token_rows(tokenizer: Any, rows: list[dict[str, Any]], max_length: int) -> list[dict]:
    """The rows tokenized (``chat_tokens``), those with no token in the loss left out."""
    out = []
    for row in rows:
        tokens = chat_tokens(tokenizer, row, max_length)
        if any(label != IGNORE for label in tokens["labels"]):
            out.append(tokens)
    return out


def train_sft(args: SFTArgs, resume: bool = True) -> Path:
    """Train and return the adapter folder (``out/adapter``). The run folder holds ``run.json``
    (the settings' fingerprint) and a lock: a rerun with the same settings resumes from the
    newest checkpoint, one with other settings is refused before any weights load.

    Raises:
        ConfigError: the data holds no row (of ``args.games``) with a token to train on.
        ConfigDriftError: ``out`` holds a run made with other settings.
        RunLockedError: another process is training into ``out``.
    """
    from transformers import AutoTokenizer

    path = model_path(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    data = ",".join(map(str, args.folders))
    rows, held_out = read_folders(args.folders, args.games, args.eval_examples)
    if not rows:
        if args.games and read_folders(args.folders)[0]:
            raise ConfigError(f"{data} holds no rows of {', '.join(args.games)}")
        raise ConfigError(f"{data}: train.jsonl holds no chats")
    train_rows = token_rows(tokenizer, rows, args.max_length)
    if not train_rows:
        raise ConfigError(f"{data}: no chat has an accepted answer to train on")
    with RunFolder(args.out, args.fingerprint()) as run:
        adapter = _fit(args, path, tokenizer, train_rows, held_out, resume)
        run.finish("finished")
    return adapter


def _fit(
    args: SFTArgs,
    path: str | Path,
    tokenizer: Any,
    train_rows: list[dict],
    held_out: list[dict[str, Any]],
    resume: bool,
) -> Path:
    """TRL's SFT of a fresh LoRA on ``train_rows`` (evaluated on ``held_out``), resumed from the
    newest checkpoint in ``args.out`` when ``resume``; writes and returns ``out/adapter``."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if args.bf16 else torch.float32
    )
    model = merge_adapters(model, args.adapter)  # a staged recipe: earlier SFT runs under it
    train = Dataset.from_list(train_rows)
    test = None  # no held-out chats: train without evaluation
    test_rows = token_rows(tokenizer, held_out, args.max_length)
    if test_rows:
        test = Dataset.from_list(test_rows)
    config = sft_config(
        args,
        output_dir=args.out,
        seed=args.seed,
        bf16=args.bf16,
        max_steps=args.max_steps,
        per_device_eval_batch_size=args.batch_size,
        eval_strategy="steps" if test is not None else "no",
        eval_steps=args.eval_steps,
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        logging_steps=5,
        disable_tqdm=False,
    )
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=args.target_modules,
        task_type="CAUSAL_LM",
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=train,
        eval_dataset=test,
        processing_class=tokenizer,
        peft_config=lora,
    )
    has_checkpoint = resume and any(args.out.glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if has_checkpoint else None)
    adapter = args.out / "adapter"
    trained: Any = trainer.model  # the PEFT model SFTTrainer wrapped
    trained.save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    if args.merge:
        merged = trained.merge_and_unload()
        merged.save_pretrained(args.out / "merged")
        tokenizer.save_pretrained(args.out / "merged")
    return adapter
