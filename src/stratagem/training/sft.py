"""LoRA SFT with TRL (SPEC §5): ``stratagem train sft``.

TRL's ``SFTTrainer`` with a PEFT LoRA adapter on the attention projections of the language model
only (rank 32, α 64, dropout 0.05), cosine schedule with 5 % warmup, an eval split and
checkpoints. Each row is one multi-turn chat (one episode of one demonstrator); the loss covers
**every assistant turn** and nothing else. ``tokenize_chat`` builds the token ids and labels
turn by turn from the chat template (TRL's ``assistant_only_loss`` needs templates with
generation markers, which SmolLM2's lacks), so the tokens are those a rollout of the same chat
conditions on: each turn is tokenized on its own, as the HF backend continues a chat.

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
    """Train on these games' chats only (e.g. ipd out of multi); empty: all."""
    out: Path = Path("runs/sft")
    """The run folder: checkpoints and the final adapter (out/adapter)."""
    rank: int = 32
    """LoRA rank."""
    alpha: int = 64
    """LoRA α."""
    dropout: float = 0.05
    """LoRA dropout."""
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """LoRA targets: the attention projections of the language model only."""
    learning_rate: float = 2e-5
    """Peak learning rate (paper: 2e-5; the CPU demo uses 2e-4)."""
    epochs: float = 3.0
    """Passes over the training chats."""
    warmup_ratio: float = 0.05
    """Share of the steps spent warming the cosine schedule up."""
    batch_size: int = 8
    """Chats per device step."""
    grad_accum: int = 1
    """Steps of gradient accumulation per optimiser step."""
    max_steps: int = -1
    """A step budget (-1: run the epochs)."""
    max_length: int = 2048
    """Tokens per chat at most (longer chats are cut at the end)."""
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


IGNORE = -100  # the label of a token outside the loss


def tokenize_chat(
    tokenizer, messages: list[dict[str, str]], max_length: int, *, targets: str = "all"
) -> dict:
    """``input_ids`` and ``labels`` of a chat: labels are the ids on every assistant turn (its
    text and the end-of-turn tokens the template closes it with) and ``IGNORE`` elsewhere;
    ``targets="last"`` labels only the final turn (a prompt/completion row from ``--turns``).

    Turn k's text is the difference between the template rendered up to turn k and up to turn
    k − 1 (with the generation prompt before an assistant turn), tokenized on its own.
    Naive equivalent: tokenize the whole rendered chat and mask by character offsets.
    """
    ids: list[int] = []
    labels: list[int] = []
    done = ""
    for k, message in enumerate(messages):
        if message["role"] == "assistant":
            prompt = tokenizer.apply_chat_template(
                messages[:k], tokenize=False, add_generation_prompt=True
            )
            head = prompt[len(done) :]
            part = tokenizer(head, add_special_tokens=False).input_ids
            ids += part
            labels += [IGNORE] * len(part)
            done = prompt
        text = tokenizer.apply_chat_template(messages[: k + 1], tokenize=False)
        if not text.startswith(done):
            raise ValueError("the chat template rewrites earlier turns; cannot mask per turn")
        part = tokenizer(text[len(done) :], add_special_tokens=False).input_ids
        ids += part
        trained = message["role"] == "assistant" and (targets == "all" or k == len(messages) - 1)
        labels += part if trained else [IGNORE] * len(part)
        done = text
    return {"input_ids": ids[:max_length], "labels": labels[:max_length]}


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

    def tokenized(row: dict) -> dict:
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
        eval_strategy="steps" if test is not None else "no",
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
