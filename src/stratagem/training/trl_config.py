"""SFT with TRL, shared by ``sft`` and ``selfplay``: the ``SFTConfig`` both build from their
``TRLArgs``, and the tokenized chat rows (``input_ids`` / ``labels``) they train on.

``tokenize_chat`` builds the ids and labels turn by turn from the chat template (TRL's
``assistant_only_loss`` needs templates with generation markers, which SmolLM2's lacks), so the
tokens are those a rollout of the same chat conditions on: each turn is tokenized on its own, as
the HF backend continues a chat.

An answer the game refused carries no loss (SPEC §7): it stays in the context, because the retry
was conditioned on it, but a model must not learn to write it. ``refused_turns`` reads which
answers those are from a chat row (see its docstring for the markers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from stratagem.games.corrections import correction_text
from stratagem.training.args import TRLArgs

IGNORE = -100  # the label of a token outside the loss
# what every correction turn of the shared policy starts with (bargaining, Deal or No Deal)
CORRECTION_OPENING = correction_text("\x00", 1).split("\x00", 1)[0]


def refused_turns(messages: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Per assistant turn of ``messages``, whether the game refused that answer.

    An answer is refused when its message carries ``"refused": true`` (what ``gen-sft`` marks:
    an answer sent back with a correction, replaced by the game's fallback move, or the one
    that aborted the game), or when the next turn is a user turn holding the game's
    correction (the shared wording of ``games.corrections``), which needs no marker.
    """
    out = []
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        after = messages[k + 1] if k + 1 < len(messages) else None
        corrected = (
            after is not None
            and after["role"] == "user"
            and str(after["content"]).startswith(CORRECTION_OPENING)
        )
        out.append(bool(message.get("refused")) or corrected)
    return out


def tokenize_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    max_length: int,
    *,
    targets: str = "all",
    trained: Sequence[bool] | None = None,
    cut: Literal["end", "start"] = "end",
) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` of a chat: labels are the ids on every assistant turn (its
    text and the end-of-turn tokens the template closes it with) and ``IGNORE`` elsewhere;
    ``targets="last"`` labels only the final turn (a prompt/completion row from ``--turns``);
    ``trained`` (one flag per assistant turn) further leaves the turns flagged False out of the
    loss, their tokens kept.

    A chat longer than ``max_length`` tokens is cut: ``cut="end"`` drops the tokens past it;
    ``cut="start"`` drops the earliest whole exchanges (a user turn and the answers after it)
    after the system turn until the chat fits, so the last answer is always kept, and when the
    system turn and the last exchange alone are too long keeps their last ``max_length`` tokens.

    Turn k's text is the difference between the template rendered up to turn k and up to turn
    k − 1 (with the generation prompt before an assistant turn), tokenized on its own.
    Naive equivalent: tokenize the whole rendered chat and mask by character offsets.

    Raises:
        ValueError: ``trained`` does not hold one flag per assistant turn, or the template
            rewrites earlier turns (so a turn's tokens cannot be told apart).
    """
    chat = [{"role": m["role"], "content": m["content"]} for m in messages]  # markers dropped
    flags = list(trained) if trained is not None else None
    assistants = sum(m["role"] == "assistant" for m in chat)
    if flags is not None and len(flags) != assistants:
        raise ValueError(f"{len(flags)} flags for {assistants} assistant turns")
    ids, labels = _tokens(tokenizer, chat, targets, flags)
    if len(ids) <= max_length or cut == "end":
        return {"input_ids": ids[:max_length], "labels": labels[:max_length]}
    head = 1 if chat and chat[0]["role"] == "system" else 0
    starts = [k for k in range(head + 1, len(chat)) if chat[k]["role"] == "user"]
    for start in starts:  # drop the exchanges before ``start``; re-rendered, so exact
        dropped = sum(m["role"] == "assistant" for m in chat[head:start])
        kept = flags[dropped:] if flags is not None else None
        ids, labels = _tokens(tokenizer, chat[:head] + chat[start:], targets, kept)
        if len(ids) <= max_length:
            break
    return {"input_ids": ids[-max_length:], "labels": labels[-max_length:]}


def _tokens(
    tokenizer: Any, messages: list[dict[str, str]], targets: str, flags: list[bool] | None
) -> tuple[list[int], list[int]]:
    ids: list[int] = []
    labels: list[int] = []
    done = ""
    answer = 0
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
        if message["role"] == "assistant":
            trained = trained and (flags is None or flags[answer])
            answer += 1
        labels += part if trained else [IGNORE] * len(part)
        done = text
    return ids, labels


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
