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
- A trainer's rollouts (``TrainerVLLMBackend``): transformers keeps the policy and computes the
  gradients; the engine serves the base weights (with the SFT adapter merged, written once) and
  the policy's LoRA, saved and reloaded under a new id whenever the trainer's weights change.
  Each generation then carries the prompt and answer token ids and the sampled tokens'
  log-probabilities at the sampling temperature (``logprobs_mode="processed_logprobs"``), and a
  seat's next prompt continues from the exact ids it was given and sampled, as ``hf`` does.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratagem.backends.base import Chat, Generation, Sampling, StopCheck
from stratagem.backends.embedded import EMBEDDED, EMBEDDED_NAME
from stratagem.backends.hf import _Chains
from stratagem.errors import ConfigError, StratagemError

__all__ = [
    "TrainerVLLMBackend",
    "VLLMApi",
    "VLLMBackend",
    "first_stop",
    "trie_probs",
    "vllm_api",
    "vllm_unavailable",
    "write_base",
]

LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM accepts


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
        self._chains: _Chains | None = None  # token-level chat continuation (trainers only)
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
        finish = {"length": "length", "abort": "error"}.get(completion.finish_reason, "stop")
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
            finish_reason=finish,  # type: ignore[arg-type]
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


class TrainerVLLMBackend(VLLMBackend):
    """A vLLM engine that samples a trainer's PEFT policy (SEPO's ``--rollout-engine vllm``).

    The trainer keeps the policy in transformers and computes the gradients there; this engine
    only samples. It serves ``model`` (a hub id or folder; ``None``: the policy's own frozen base
    weights, written once to ``folder/base`` by ``write_base``, which is how an SFT adapter
    merged into the base reaches vLLM) and applies the policy's LoRA adapter to every request.
    ``sync`` saves that adapter to ``folder/adapters/adapter-N`` and loads it under the new id
    N; ``reset_prefix_cache``, which a trainer calls whenever its weights change, syncs first.

    Generations carry ``prompt_ids``, ``token_ids`` and ``token_logprobs``: the log-probability
    of each sampled token at the sampling temperature (the engine's ``logprobs_mode`` is
    ``processed_logprobs``; with ``top_p < 1`` vLLM's would be those of the truncated
    distribution, while ``hf`` records the untruncated ones). On a GPU both engines run bf16, so
    these rollout-time log-probs differ from the trainer's by the engines' numerical mismatch.

    Args:
        policy: The trainer's PEFT model (its active adapter is what ``sync`` saves).
        tokenizer: The policy's tokenizer (written beside the base weights).
        folder: Where the base weights and the adapters go (inside the run folder).
        model: What the engine serves; ``None`` writes the policy's base weights.
        model_id: The backend's name in traces.
        lora_rank: The policy's LoRA rank (the engine reserves the next rank vLLM accepts).
        gpu_memory_utilization: vLLM's share of the GPU; the transformers policy, its
            optimiser and activations live in the rest.
        api, engine, **engine_args: As for ``VLLMBackend``.
    """

    def __init__(
        self,
        policy: Any,
        tokenizer: Any,
        folder: Path,
        *,
        model: str | None = None,
        model_id: str | None = None,
        lora_rank: int = 16,
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        api: VLLMApi | None = None,
        engine: Any = None,
        **engine_args: Any,
    ):
        rank = next((r for r in LORA_RANKS if r >= lora_rank), None)
        if rank is None:
            raise ConfigError(f"vLLM serves LoRA ranks up to {LORA_RANKS[-1]}, not {lora_rank}")
        self.policy = policy
        self.folder = Path(folder)
        shutil.rmtree(self.folder / "adapters", ignore_errors=True)  # an earlier process's
        if model is None:
            model = str(self.folder / "base")
            write_base(policy, tokenizer, model)
        super().__init__(
            model,
            seed=seed,
            max_lora_rank=rank,
            enable_lora=True,
            gpu_memory_utilization=gpu_memory_utilization,
            engine=engine,
            api=api,
            logprobs_mode="processed_logprobs",
            **engine_args,
        )
        self.model_id = model_id or self.model_id
        self.return_ids = True
        self._chains = _Chains()
        self.sync()

    def sync(self) -> None:
        """Save the policy's current adapter to a fresh folder and use it from the next request
        on (the engine loads it under a new id); keep only the previous adapter's folder."""
        path = self.folder / "adapters" / f"adapter-{self._lora_id + 1}"
        self.policy.save_pretrained(str(path))
        self.load_adapter(str(path))
        shutil.rmtree(self.folder / "adapters" / f"adapter-{self._lora_id - 2}", ignore_errors=True)

    def reset_prefix_cache(self) -> None:
        """The trainer's weights changed: ``sync``, then forget cached prompts and chats."""
        self.sync()
        super().reset_prefix_cache()


def write_base(policy: Any, tokenizer: Any, path: str | Path) -> None:
    """Write a PEFT ``policy``'s frozen base weights (its LoRA layers left out, so any adapter
    merged into the base stays merged) and ``tokenizer`` as a transformers model folder.

    Naive equivalent: load the base model, merge the SFT adapter, ``save_pretrained``; the tests
    check both give the same logits.
    """
    base = policy.get_base_model()
    state = {
        name.replace(".base_layer.", "."): tensor
        for name, tensor in base.state_dict().items()
        if ".lora_" not in name
    }
    base.save_pretrained(str(path), state_dict=state)
    tokenizer.save_pretrained(str(path))


def first_stop(
    ids: Sequence[int], check: StopCheck, decode: Callable[[Sequence[int]], str]
) -> int | None:
    """Returns the fewest leading tokens of ``ids`` whose text passes ``check`` (where a
    generation with a stop check would have stopped), or None when no prefix does."""
    for n in range(1, len(ids) + 1):
        if check(decode(ids[:n])):
            return n
    return None


def trie_probs(
    token_ids: Sequence[Sequence[int]], logprob: Callable[[int, int], float]
) -> list[float]:
    """Returns each choice's probability when every other continuation is masked (SPEC §4.3).

    ``token_ids[j]`` are choice ``j``'s tokens; ``logprob(j, pos)`` is the model's log-probability
    of ``token_ids[j][pos]`` after the prompt and ``token_ids[j][:pos]``. At each branching point
    on a choice's path the probability is the softmax restricted to the children there; the
    product over its branching points, normalised over the choices, is the choice's probability.
    Naive equivalent: ``hf._Trie.score`` on full logit vectors (``tests/backends`` compares them).
    """
    scores = []
    for ids in token_ids:
        p = 1.0
        for pos, token in enumerate(ids):
            prefix = tuple(ids[:pos])
            # the children at this node, each with a choice that passes through it
            children: dict[int, int] = {}
            for j, other in enumerate(token_ids):
                if len(other) > pos and tuple(other[:pos]) == prefix:
                    children.setdefault(other[pos], j)
            if len(children) > 1:
                logps = {t: logprob(j, pos) for t, j in children.items()}
                top = max(logps.values())
                total = sum(math.exp(v - top) for v in logps.values())
                p *= math.exp(logps[token] - top) / total
            if not any(
                len(other) > pos + 1 and tuple(other[: pos + 1]) == tuple(ids[: pos + 1])
                for other in token_ids
            ):
                break  # no choice continues past here: the rest cannot branch
        scores.append(p)
    total = sum(scores)
    return [s / total for s in scores]
