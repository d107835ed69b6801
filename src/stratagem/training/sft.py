"""LoRA SFT with TRL (SPEC §5): ``stratagem train sft``.

TRL's ``SFTTrainer`` with a PEFT LoRA adapter on the attention projections of the language model
only (rank 32, α 64, dropout 0.05), cosine schedule with 5 % warmup, loss on the assistant turn
only, an eval split and checkpoints. Chat rows are turned into TRL's conversational
prompt/completion form, whose loss covers the completion alone — this works with any chat
template (``assistant_only_loss`` needs templates with generation markers, which SmolLM2's lacks).

Departures from the paper, on purpose: the CPU demo raises the learning rate (2e-4 instead of
2e-5) and caps the steps, so that a few hundred steps teach the answer format; the GPU recipe
keeps the paper's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stratagem.backends.embedded import EMBEDDED, embedded_dir
from stratagem.errors import ConfigError


@dataclass
class SFTArgs:
    """Hyperparameters of ``stratagem train sft`` (defaults: SEPO App. H)."""

    model: str = EMBEDDED
    """A Hugging Face id, a local folder, or ``embedded`` (SmolLM2-135M-Instruct)."""
    data: Path = Path("data/sft/kuhn")
    """A folder with train.jsonl and test.jsonl from ``stratagem gen-sft``."""
    games: tuple[str, ...] = ()
    """Train on these games' rows only (e.g. ``("ipd",)`` out of ``multi``); empty: all."""
    out: Path = Path("runs/sft")
    rank: int = 32
    alpha: int = 64
    dropout: float = 0.05
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """Attention projections of the language model only."""
    learning_rate: float = 2e-5
    epochs: float = 3.0
    warmup_ratio: float = 0.05
    batch_size: int = 8
    grad_accum: int = 1
    max_steps: int = -1
    """A step budget (-1: run the epochs)."""
    max_length: int = 768
    eval_examples: int = 200
    """Test-split examples used for the eval loss (the full split is slow on CPU)."""
    eval_steps: int = 50
    save_steps: int = 50
    save_total_limit: int | None = None
    seed: int = 42
    merge: bool = False
    """Also write the adapter merged into the base weights."""
    bf16: bool = False


def _prompt_completion(row: dict) -> dict:
    messages = row["messages"]
    return {"prompt": messages[:-1], "completion": messages[-1:]}


def train_sft(args: SFTArgs, resume: bool = True) -> Path:
    """Train and return the adapter folder (``out/adapter``)."""
    import torch
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    path = str(embedded_dir()) if args.model == EMBEDDED else args.model
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if args.bf16 else torch.float32
    )
    files = {"train": str(args.data / "train.jsonl"), "test": str(args.data / "test.jsonl")}
    data = load_dataset("json", data_files=files)
    if args.games:
        data = data.filter(lambda row: row["game"] in args.games)
        if not len(data["train"]):
            raise ConfigError(f"{args.data} holds no rows of {', '.join(args.games)}")
    keep = ["prompt", "completion"]
    train = data["train"].map(_prompt_completion).select_columns(keep)
    test = data["test"].map(_prompt_completion).select_columns(keep)
    test = test.select(range(min(args.eval_examples, len(test))))
    config = SFTConfig(
        output_dir=str(args.out),
        learning_rate=args.learning_rate,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        lr_scheduler_type="cosine",
        warmup_steps=args.warmup_ratio,  # a float below 1 is a ratio of the total steps
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length,
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        logging_steps=5,
        report_to=[],
        seed=args.seed,
        bf16=args.bf16,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=False,
    )
    lora = LoraConfig(
        r=args.rank,
        lora_alpha=args.alpha,
        lora_dropout=args.dropout,
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
    trainer.model.save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    if args.merge:
        merged = trainer.model.merge_and_unload()
        merged.save_pretrained(args.out / "merged")
        tokenizer.save_pretrained(args.out / "merged")
    return adapter
