"""A GGUF model served in-process by llama.cpp as a ``Backend``, prompted with transformers'
tokenizer: batched generation with per-row seeds and stops, constrained choice distributions.

Prompts are rendered and tokenized exactly as the hf backend does (``hf.prompts.ChatTokens``:
the chat template, the system turn tokenized on its own, a trainer's chats continued from the
ids they were given and sampled), and the ids go to llama.cpp as they are, so a generation's
``prompt_ids`` and ``token_ids`` are the transformers tokenizer's: the GGUF's own vocabulary is
never used to tokenize. Sampling draws each row from its own generator seeded by its decision
seed with ``hf.sampling.sample_rows`` — the hf backend's draw — on llama.cpp's logits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stratagem.backends.base import Chat, FinishReason, Generation, Sampling, StopCheck
from stratagem.backends.chains import Chains
from stratagem.backends.hf.prompts import ChatTokens
from stratagem.backends.hf.sampling import sample_rows
from stratagem.backends.llamacpp.engine import CacheFull, LlamaCppEngine
from stratagem.backends.trie import Trie

__all__ = ["LlamaCppBackend"]


class LlamaCppBackend(ChatTokens):
    """A GGUF model run by llama.cpp in this process, as a ``Backend`` (SPEC §4.2).

    Args:
        gguf: the model file (its vocabulary must be ``tokenizer``'s: same ids).
        tokenizer: the transformers tokenizer that renders and tokenizes the chats.
        model_id: the backend's name in traces.
        stop_ids: token ids that end a generation besides the tokenizer's end-of-sequence and
            padding tokens (a model's ``generation_config.eos_token_id``).
        max_batch: the most chats one decoding loop runs.
        return_ids: give each generation its prompt and answer ids and the sampled tokens'
            log-probabilities, and continue each chat from those ids (trainers).
        **engine_args: as for ``LlamaCppEngine`` (``n_ctx``, ``threads``, ``kv_dtype``, ...).
    """

    def __init__(
        self,
        gguf: str | Path,
        tokenizer: Any,
        *,
        model_id: str,
        stop_ids: Sequence[int] = (),
        max_batch: int = 64,
        return_ids: bool = False,
        **engine_args: Any,
    ):
        self.engine = LlamaCppEngine(gguf, **engine_args)
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.fingerprint = model_id
        self.max_batch = max_batch
        self.return_ids = return_ids
        self._chains = Chains() if return_ids else None
        ends = {tokenizer.eos_token_id, tokenizer.pad_token_id, *stop_ids}
        self.stop_ids = frozenset(int(t) for t in ends if t is not None)

    def reset_prefix_cache(self) -> None:
        """Forget every cached prompt and the token ids of earlier turns."""
        self.engine.clear()
        if self._chains is not None:
            self._chains.clear()

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
    ) -> list[Generation]:
        """Returns one completion per chat (see ``Backend.generate``), in chunks of
        ``max_batch``. A sampled row draws from its own generator seeded by its decision seed,
        so its text depends only on (chat, seed) and the weights."""
        checks: list[StopCheck | None] = list(stop) if stop is not None else [None] * len(chats)
        row_seeds = list(seeds) if seeds is not None else [0] * len(chats)
        out: list[Generation] = []
        for start in range(0, len(chats), self.max_batch):
            end = start + self.max_batch
            out += self._generate_fitting(
                list(chats[start:end]), sampling, checks[start:end], row_seeds[start:end]
            )
        return out

    def _generate_fitting(
        self,
        chats: list[Chat],
        sampling: Sampling,
        checks: list[StopCheck | None],
        seeds: list[int],
    ) -> list[Generation]:
        """``_generate_chunk``, in halves (from an emptied cache) while the chunk does not fit
        in the KV cache; a row's answer does not depend on which rows share its batch."""
        try:
            return self._generate_chunk(chats, sampling, checks, seeds)
        except CacheFull:
            self.engine.clear()  # cached sequences the batch shares a prefix with are kept
        if len(chats) == 1:  # alone in an empty cache, or the one-line error
            return self._generate_chunk(chats, sampling, checks, seeds)
        half = len(chats) // 2
        return self._generate_fitting(
            chats[:half], sampling, checks[:half], seeds[:half]
        ) + self._generate_fitting(chats[half:], sampling, checks[half:], seeds[half:])

    def _generate_chunk(
        self,
        chats: list[Chat],
        sampling: Sampling,
        checks: list[StopCheck | None],
        seeds: list[int],
    ) -> list[Generation]:
        import torch

        begin = time.perf_counter()
        prompts = [self.render(c) for c in chats]
        rows = [self._tokenize(c, p)[0] for c, p in zip(chats, prompts, strict=True)]
        placements, first = self.engine.prefill(
            rows, [len(r) - 1 for r in rows], reserve=sampling.max_new_tokens
        )
        logits = np.concatenate(first)  # (B, V)
        generators = [torch.Generator().manual_seed(int(s) % (2**63)) for s in seeds]
        ids: list[list[int]] = [[] for _ in chats]
        logps: list[list[float]] = [[] for _ in chats]
        finish: list[FinishReason | None] = [None] * len(chats)
        live = list(range(len(chats)))
        while live:
            scores = torch.from_numpy(logits)  # (live, V)
            if sampling.greedy:
                picked, chosen = scores.argmax(-1), None
            else:
                gens = [generators[i] for i in live]
                picked, chosen = sample_rows(scores, gens, sampling.temperature, sampling.top_p)
            for j, i in enumerate(live):
                finish[i] = self._accept(int(picked[j]), ids[i], checks[i], sampling.max_new_tokens)
                if chosen is not None and finish[i] != "stop":
                    logps[i].append(float(chosen[j]))
            live = [i for i in live if finish[i] is None]
            if live:
                steps = [
                    (ids[i][-1], len(rows[i]) + len(ids[i]) - 1, placements[i].seq) for i in live
                ]
                logits = self.engine.step(steps)
        seconds = (time.perf_counter() - begin) / len(chats)
        gens_out = []
        for i, row in enumerate(rows):
            text = self._decode(ids[i])
            info: dict[str, Any] = {}
            if self.return_ids:
                info = {"prompt_ids": row, "token_ids": ids[i]}
                if not sampling.greedy:
                    info["token_logprobs"] = logps[i]
                if self._chains is not None:
                    self._chains.add(prompts[i], text, row + ids[i])
            gens_out.append(
                Generation(
                    text=text,
                    tokens=len(ids[i]),
                    prompt_tokens=len(row),
                    prefill_tokens=len(row) - placements[i].start,
                    finish_reason=finish[i] or "stop",
                    seconds=seconds,
                    info=info,
                )
            )
        return gens_out

    def _accept(
        self, token: int, ids: list[int], check: StopCheck | None, max_new_tokens: int
    ) -> FinishReason | None:
        """Append a row's sampled ``token`` to its ``ids`` unless it ends the answer; returns
        why the row is done (an end token, its stop check, its length), or None."""
        if token in self.stop_ids:
            return "stop"
        ids.append(token)
        if check is not None and check(self._decode(ids)):
            return "action"
        return "length" if len(ids) >= max_new_tokens else None

    def _decode(self, ids: Sequence[int]) -> str:
        text: str = self.tokenizer.decode(list(ids), skip_special_tokens=True)
        return text

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns, for each chat, the distribution over its choices at the start of the answer
        (SPEC §4.3), as the hf backend computes it: the first answer token's log-probabilities
        from one batched prefill; a chat whose choices share leading sub-tokens has every choice
        teacher-forced after the prompt and is scored at their shortest distinguishing prefix.
        A batch too big for the KV cache is scored in halves, as ``generate`` runs them.
        """
        if not chats:
            return []
        try:
            return self._choice_probs_chunk(chats, choices)
        except CacheFull:
            self.engine.clear()
        if len(chats) == 1:  # alone in an empty cache, or the one-line error
            return self._choice_probs_chunk(chats, choices)
        half = len(chats) // 2
        return self.choice_probs(chats[:half], choices[:half]) + self.choice_probs(
            chats[half:], choices[half:]
        )

    def _choice_probs_chunk(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        import torch

        rows = [self._tokenize(c)[0] for c in chats]
        _, last = self.engine.prefill(rows, [len(r) - 1 for r in rows])
        first = torch.log_softmax(torch.from_numpy(np.concatenate(last)), dim=-1)  # (B, V)
        out = []
        for i, cs in enumerate(choices):
            token_ids = [self.tokenizer(c, add_special_tokens=False).input_ids for c in cs]
            trie = Trie.build(token_ids)
            if trie.branch_depth == 0:
                scores = [trie.score(ids, (first[i],)) for ids in token_ids]
            else:
                scores = self._deeper(rows[i], first[i], token_ids, trie.depth)
            total = sum(scores)
            out.append({c: s / total for c, s in zip(cs, scores, strict=True)})
        return out

    def _deeper(self, prompt: list[int], first: Any, token_ids: list[list[int]], depth: int):
        """Scores of choices that share leading sub-tokens: each choice's first ``depth - 1``
        tokens (padded with its last) teacher-forced after the prompt, in one batch."""
        import torch

        cont = [
            ids[: depth - 1] + [ids[-1]] * (depth - 1 - len(ids[: depth - 1])) for ids in token_ids
        ]
        rows = [prompt + c for c in cont]
        _, logits = self.engine.prefill(rows, [len(prompt)] * len(rows))
        trie = Trie.build(token_ids)
        scores = []
        for ids, lg in zip(token_ids, logits, strict=True):
            deep = torch.log_softmax(torch.from_numpy(lg), dim=-1)  # (depth - 1, V)
            scores.append(trie.score(ids, (first, *deep)))
        return scores
