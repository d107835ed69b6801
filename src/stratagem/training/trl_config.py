"""SFT with TRL, shared by ``sft`` and ``selfplay``: the ``SFTConfig`` both build from their
``TRLArgs``, and the tokenized chat rows (``input_ids`` / ``labels``) they train on.

``tokenize_chat`` builds the ids and labels turn by turn from the chat template (TRL's
``assistant_only_loss`` needs templates with generation markers, which SmolLM2's lacks), so the
tokens are those a rollout of the same chat conditions on: each turn is tokenized on its own, as
the HF backend continues a chat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stratagem.training.args import TRLArgs

IGNORE = -100  # the label of a token outside the loss


def tokenize_chat(
    tokenizer: Any, messages: list[dict[str, str]], max_length: int, *, targets: str = "all"
) -> dict[str, list[int]]:
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


def sft_config(args: TRLArgs, *, output_dir: Path, seed: int, bf16: bool, **options: Any) -> Any:
    """TRL's ``SFTConfig`` of one SFT job on ``args``: cosine schedule with ``warmup_ratio``
    warm-up, ``batch_size`` chats per device step, chats cut at ``max_length`` tokens, no
    reporting, on the CPU when there is no GPU; ``options`` are further ``SFTConfig`` fields
    (evaluation, saving, logging)."""
    import torch
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(output_dir),
        learning_rate=args.learning_rate,
        num_train_epochs=args.epochs,
        lr_scheduler_type="cosine",
        warmup_steps=args.warmup_ratio,  # a float below 1 is a ratio of the total steps
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        max_length=args.max_length,
        report_to=[],
        seed=seed,
        bf16=bf16,
        use_cpu=not torch.cuda.is_available(),
        **options,
    )
