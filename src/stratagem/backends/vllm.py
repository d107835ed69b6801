"""An in-process vLLM engine as a ``Backend``: fast GPU rollouts (SPEC §4.2, §4.3).

Written against vLLM's documented offline API (``vllm.LLM``, ``SamplingParams``,
``lora.request.LoRARequest``, token-id prompts, ``prompt_logprobs``) and tested without a GPU on a
fake engine (the request, seed and LoRA plumbing, stop cuts, choice scoring); **it has not yet run
on a GPU**. ``pip install 'stratagem[vllm]'`` installs vLLM, which brings its own CUDA torch.

How it maps the backend contract, and where it departs from ``hf``:

- ``generate``: one ``LLM.generate`` call for the whole batch (vLLM schedules it continuously).
  Each request has its own ``SamplingParams`` whose ``seed`` is the decision seed, so sampled
  text depends on (prompt, seed) and not on the other requests (up to the last bits of the
  logits, as with ``hf``: RELIABILITY D4). Prompts go in as token ids of the rendered chat
  template, so the engine never re-tokenizes them.
- Stop checks: vLLM takes no per-token Python callback, so a sequence runs to EOS or
  ``max_new_tokens`` and is then cut at the first token where its check holds, the text ``hf``
  would have stopped at (a token never depends on later ones); finish reason ``action``. The
  tokens after the answer are generated and thrown away.
- ``choice_probs``: every choice's tokens are teacher-forced after the prompt and read back with
  ``prompt_logprobs``; a choice's probability is the product, over the branching points of the
  choices' token trie, of the softmax restricted to the children (``trie_probs``: the same
  arithmetic as ``hf``'s masked decode, so choices sharing a first sub-token are told apart at
  their shortest distinguishing prefix). Prefix caching computes the shared prompt once.
- LoRA: one adapter folder, sent with every request as a ``LoRARequest``; ``load_adapter``
  gives a new adapter id so a trainer's updated weights are loaded afresh. Stacked adapters
  (``a,b``) must be merged first.
- Prefix caching is on (``enable_prefix_caching``); ``reset_prefix_cache`` after weight updates.
- A trainer's rollouts: ``training.engines.vllm.TrainerVLLMBackend``.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stratagem.backends.base import Chat, FinishReason, Generation, Sampling, StopCheck
from stratagem.backends.chains import Chains
from stratagem.backends.embedded import EMBEDDED, EMBEDDED_NAME
from stratagem.backends.trie import trie_probs
from stratagem.errors import ConfigError, StratagemError

__all__ = [
    "VLLMApi",
    "VLLMBackend",
    "first_stop",
    "trie_probs",
    "vllm_api",
    "vllm_unavailable",
]


@dataclass(frozen=True)
class VLLMApi:
    """The three vLLM names the backend uses (tests pass fakes)."""

    LLM: Any
    SamplingParams: Any
    LoRARequest: Any


def vllm_api() -> VLLMApi:
    """Returns vLLM's ``LLM``, ``SamplingParams`` and ``LoRARequest``.

    Raises:
        StratagemError: vLLM is not installed.
    """
    try:
        from vllm import LLM, SamplingParams
        from vllm.lora.request import LoRARequest
    except ImportError:
        raise StratagemError(
            "the vllm backend needs vLLM and a GPU: pip install 'stratagem[vllm]'"
        ) from None
    return VLLMApi(LLM, SamplingParams, LoRARequest)


def vllm_unavailable() -> str | None:
    """Returns why the vLLM backend cannot run on this machine (not installed, no CUDA GPU), or
    None when it can; imports neither vLLM nor, when vLLM is missing, torch."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed: pip install 'stratagem[vllm]' (on a machine with a GPU)"
    import torch

    if not torch.cuda.is_available():
        return "vLLM needs a CUDA GPU and torch sees none"
    return None


class VLLMBackend:
    """An in-process vLLM engine as a ``Backend`` (SPEC §4.2), optionally with a LoRA adapter.

    Args:
        model: ``embedded`` (the bundled SmolLM2, converted once to a safetensors folder), a hub
            id or a local folder.
        adapter: One LoRA adapter folder (PEFT format).
        dtype: vLLM's ``dtype`` (``auto``, ``bfloat16``, ``float16``, ``float32``).
        seed: The engine's seed (per-request seeds override it for sampling).
        max_lora_rank: The largest adapter rank the engine reserves room for.
        enable_lora: Whether the engine takes LoRA adapters; default: when ``adapter`` is given.
        gpu_memory_utilization: Share of GPU memory vLLM may take (weights + KV cache).
        engine: An already built engine (a trainer's, or a test's fake); ``None`` builds one.
        api: The vLLM names to use (tests pass fakes); default ``vllm_api()``.
        **engine_args: Further ``vllm.LLM`` arguments (``max_model_len``,
            ``tensor_parallel_size``, ...).
    """

    def __init__(
        self,
        model: str = EMBEDDED,
        *,
        adapter: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        max_lora_rank: int = 64,
        enable_lora: bool | None = None,
        gpu_memory_utilization: float = 0.9,
        engine: Any = None,
        api: VLLMApi | None = None,
        **engine_args: Any,
    ):
        if adapter and "," in adapter:
            raise ConfigError(
                "the vllm backend applies one LoRA adapter: merge stacked adapters "
                f"({adapter}) into the weights first"
            )
        self.api = api or vllm_api()
        self.model_id = (EMBEDDED_NAME if model == EMBEDDED else model) + (
            f"+{adapter}" if adapter else ""
        )
        if engine is None:
            path = model
            if model == EMBEDDED:
                from stratagem.backends.embedded import embedded_dir

                path = str(embedded_dir())
            engine = self.api.LLM(
                model=path,
                dtype=dtype,
                seed=seed,
                enable_prefix_caching=True,
                enable_lora=bool(adapter) if enable_lora is None else enable_lora,
                max_lora_rank=max_lora_rank,
                gpu_memory_utilization=gpu_memory_utilization,
                **engine_args,
            )
        self.engine = engine
        self.tokenizer = engine.get_tokenizer()
        self.return_ids = False  # trainers need the exact token ids of prompts and answers
        self._chains: Chains | None = None  # token-level chat continuation (trainers only)
        self._lora_id = 0
        self.lora: Any = None
        if adapter:
            self.load_adapter(adapter)

    @classmethod
    def from_options(cls, model: str, options: Any) -> VLLMBackend:
        """Build from the CLI's agent options (``--adapter``, ``dtype``)."""
        return cls(model or EMBEDDED, adapter=options.adapter, dtype=options.dtype)

    def load_adapter(self, path: str) -> None:
        """Use the LoRA adapter in ``path`` from now on, under a new id, so vLLM loads it afresh
        (a trainer's adapter changes between rollouts)."""
        self._lora_id += 1
        self.lora = self.api.LoRARequest(f"adapter-{self._lora_id}", self._lora_id, path)

    def reset_prefix_cache(self) -> None:
        """Forget the engine's cached prompt KV (after the weights change), and the token ids of
        earlier turns (a new policy's chats start afresh)."""
        self.engine.reset_prefix_cache()
        if self._chains is not None:
            self._chains.clear()

    def render(self, chat: Chat) -> str:
        """Returns the prompt text of ``chat``: the chat template with the generation prompt."""
        return self.tokenizer.apply_chat_template(
            [dict(m) for m in chat], tokenize=False, add_generation_prompt=True
        )

    def prompt_ids(self, chat: Chat, prompt: str | None = None) -> list[int]:
        """Returns the token ids of ``chat``'s prompt (what the engine is given).

        With chained ids (trainers), a chat that continues one this backend answered starts with
        that chat's exact prompt and answer ids and only the new turn is tokenized, so the model
        is conditioned on the tokens it sampled (and a trainer reads each episode as one
        sequence), not on a re-tokenization of their text.
        """
        prompt = self.render(chat) if prompt is None else prompt
        if self._chains is not None:
            before = self._chains.continued(chat, prompt, self.render)
            if before is not None:
                known, text = before
                rest = self.tokenizer(prompt[len(text) :], add_special_tokens=False).input_ids
                return known + list(rest)
        return list(self.tokenizer(prompt, add_special_tokens=False).input_ids)

    def sampling_params(self, sampling: Sampling, seed: int | None) -> Any:
        """Returns vLLM ``SamplingParams`` for one request: greedy at temperature 0, else seeded
        with the decision seed (and, for a trainer, asking for the sampled tokens'
        log-probabilities)."""
        kwargs: dict[str, Any] = {}
        if self.return_ids and not sampling.greedy:
            kwargs["logprobs"] = 0  # the sampled token's only
        return self.api.SamplingParams(
            temperature=0.0 if sampling.greedy else sampling.temperature,
            top_p=1.0 if sampling.greedy else sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            seed=None if sampling.greedy or seed is None else int(seed) % (2**63),
            skip_special_tokens=True,
            **kwargs,
        )

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
    ) -> list[Generation]:
        """Returns one completion per chat (see ``Backend.generate``): one engine call, one
        seeded request per chat; a stop check cuts its text where the check first holds."""
        if not chats:
            return []
        start = time.perf_counter()
        texts = [self.render(c) for c in chats]
        prompts = [self.prompt_ids(c, t) for c, t in zip(chats, texts, strict=True)]
        params = [
            self.sampling_params(sampling, seeds[i] if seeds is not None else None)
            for i in range(len(chats))
        ]
        outs = self.engine.generate(
            [{"prompt_token_ids": p} for p in prompts],
            params,
            lora_request=self.lora,
            use_tqdm=False,
        )
        seconds = (time.perf_counter() - start) / len(chats)
        gens = []
        for i, (out, prompt) in enumerate(zip(outs, prompts, strict=True)):
            check = stop[i] if stop is not None else None
            gen = self._generation(out, prompt, check, seconds)
            if self._chains is not None:
                self._chains.add(texts[i], gen.text, prompt + gen.info["token_ids"])
            gens.append(gen)
        return gens

    def _generation(
        self, out: Any, prompt: list[int], check: StopCheck | None, seconds: float
    ) -> Generation:
        completion = out.outputs[0]
        ids = self._strip_stop(list(completion.token_ids))
        text = completion.text
        finish: FinishReason = "stop"
        if completion.finish_reason == "length":
            finish = "length"
        elif completion.finish_reason == "abort":
            finish = "error"
        if check is not None:
            cut = first_stop(ids, check, self._decode)
            if cut is not None:
                ids, text, finish = ids[:cut], self._decode(ids[:cut]), "action"
        cached = getattr(out, "num_cached_tokens", None) or 0
        info: dict[str, Any] = {}
        if self.return_ids:
            info = {"prompt_ids": prompt, "token_ids": ids}
            if getattr(completion, "logprobs", None):
                info["token_logprobs"] = [
                    float(getattr(entry[t], "logprob", entry[t]))
                    for entry, t in zip(completion.logprobs, ids, strict=False)
                ]
        return Generation(
            text=text,
            tokens=len(ids),
            prompt_tokens=len(prompt),
            prefill_tokens=len(prompt) - cached,
            finish_reason=finish,
            seconds=seconds,
            info=info,
        )

    def _strip_stop(self, ids: list[int]) -> list[int]:
        """Generated ids up to (not including) the first end-of-sequence or pad token, which
        vLLM returns among the ids (as ``hf`` strips them)."""
        stop = {
            getattr(self.tokenizer, "eos_token_id", None),
            getattr(self.tokenizer, "pad_token_id", None),
        } - {None}
        for i, t in enumerate(ids):
            if t in stop:
                return ids[:i]
        return ids

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns, for each chat, the distribution over its choices at the start of the answer
        (SPEC §4.3): every choice teacher-forced after the prompt in one engine call, scored
        at the branching points of the choices' token trie (``trie_probs``)."""
        requests: list[list[int]] = []
        layout = []  # per chat: (prompt length, token ids per choice, first request index)
        for chat, cs in zip(chats, choices, strict=True):
            prompt = self.prompt_ids(chat)
            ids = [list(self.tokenizer(c, add_special_tokens=False).input_ids) for c in cs]
            layout.append((len(prompt), ids, len(requests)))
            requests.extend(prompt + t for t in ids)
        if not requests:
            return [{} for _ in chats]
        params = self.api.SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0)
        outs = self.engine.generate(
            [{"prompt_token_ids": r} for r in requests],
            params,
            lora_request=self.lora,
            use_tqdm=False,
        )
        result = []
        for (n_prompt, ids, first), cs in zip(layout, choices, strict=True):

            def logprob(j: int, pos: int, n_prompt=n_prompt, ids=ids, first=first) -> float:
                entry = outs[first + j].prompt_logprobs[n_prompt + pos]
                value = entry[ids[j][pos]]
                return float(getattr(value, "logprob", value))

            probs = trie_probs(ids, logprob)
            result.append(dict(zip(cs, probs, strict=True)))
        return result


def first_stop(
    ids: Sequence[int], check: StopCheck, decode: Callable[[Sequence[int]], str]
) -> int | None:
    """Returns the fewest leading tokens of ``ids`` whose text passes ``check`` (where a
    generation with a stop check would have stopped), or None when no prefix does."""
    for n in range(1, len(ids) + 1):
        if check(decode(ids[:n])):
            return n
    return None
