"""LoRA SFT with TRL (SPEC §5): ``stratagem train sft``.

TRL's ``SFTTrainer`` with a PEFT LoRA adapter on the attention projections of the language model
only (rank 32, α 64, dropout 0.05), cosine schedule with 5 % warmup, an eval split and
checkpoints. Each row is one multi-turn chat (one episode of one demonstrator); the loss covers
**every assistant turn** and nothing else (``trl_config.tokenize_chat``).

Departures from the paper, on purpose: the CPU demo raises the learning rate (2e-4 instead of
2e-5) and caps the steps, so that a few hundred steps teach the answer format; the GPU recipe
keeps the paper's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.settings import opt
from stratagem.training.args import ModelArgs, RunArgs, TRLArgs
from stratagem.training.policy import TARGET_MODULES, model_path
from stratagem.training.trl_config import sft_config, tokenize_chat


@dataclass
class SFTArgs(TRLArgs, RunArgs, ModelArgs):
    """Hyperparameters of ``stratagem train sft`` (defaults: SEPO App. H)."""

    data: Path = Path("data/sft/kuhn")
    """A folder with train.jsonl and test.jsonl from ``stratagem gen-sft``."""
    games: tuple[str, ...] = ()
    """Train on these games' chats only (e.g. ipd out of multi); empty: all."""
    out: Path = Path("runs/sft")
    """The run folder: checkpoints and the final adapter (out/adapter)."""
    lora_rank: int = opt(32, "--rank")
    """LoRA rank."""
    lora_alpha: int = opt(64, "--alpha")
    """LoRA α."""
    target_modules: list[str] = field(default_factory=lambda: list(TARGET_MODULES))
    """LoRA targets: the attention projections of the language model only."""
    learning_rate: float = 2e-5
    """Peak learning rate (paper: 2e-5; the CPU demo uses 2e-4)."""
    max_steps: int = -1
    """A step budget (-1: run the epochs)."""
    eval_examples: int = 200
    """Test-split chats used for the eval loss (the full split is slow on a CPU)."""
    eval_steps: int = 50
    """Evaluate every this many steps."""
    save_steps: int = 50
    """Checkpoint every this many steps."""
    save_total_limit: int | None = None
    """Keep only this many checkpoints; None: all."""
    seed: int = 42
    """Seeds the shuffling and the adapter initialisation."""
    merge: bool = False
    """Also write the adapter merged into the base weights (out/merged)."""
    bf16: bool = False
    """bf16 weights (GPU)."""

    def check(self) -> None:
        """Refuses a data folder without ``train.jsonl`` before any weights load."""
        if not (Path(self.data) / "train.jsonl").exists():
            raise ConfigError(
                f"{self.data} holds no train.jsonl; write one with `stratagem gen-sft`"
            )


def train_sft(args: SFTArgs, resume: bool = True) -> Path:
    """Train and return the adapter folder (``out/adapter``)."""
    import torch
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    path = model_path(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if args.bf16 else torch.float32
    )
    files = {
        split: str(args.data / f"{split}.jsonl")
        for split in ("train", "test")
        if (args.data / f"{split}.jsonl").stat().st_size  # an empty split cannot be loaded
    }
    if "train" not in files:
        raise ConfigError(f"{args.data}/train.jsonl holds no chats")
    data = load_dataset("json", data_files=files)
    if args.games:
        data = data.filter(lambda row: row["game"] in args.games)
        if not len(data["train"]):
            raise ConfigError(f"{args.data} holds no rows of {', '.join(args.games)}")

    def tokenized(row: dict[str, Any]) -> dict[str, list[int]]:
        if row.get("messages"):  # a whole chat: every assistant turn is a target
            return tokenize_chat(tokenizer, row["messages"], args.max_length)
        # a prompt/completion row (gen-sft --turns): only the completion is a target
        messages = row["prompt"] + row["completion"]
        return tokenize_chat(tokenizer, messages, args.max_length, targets="last")

    keep = ["input_ids", "labels"]
    train = data["train"].map(tokenized).select_columns(keep)
    test = None  # no held-out chats: train without evaluation
    if "test" in data and len(data["test"]):
        test = data["test"].select(range(min(args.eval_examples, len(data["test"]))))
        test = test.map(tokenized).select_columns(keep)
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
