"""The vLLM backend on a fake engine (requests, seeds, LoRA, stop cuts, choice scoring), and on a
real GPU engine where one exists (skipped otherwise: the backend has not yet run on a GPU)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import random
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Sampling
from stratagem.backends.vllm import VLLMApi, VLLMBackend, first_stop, trie_probs
from stratagem.errors import ConfigError, StratagemError
from stratagem.games import get_game
from stratagem.parsing import holds_action
from stratagem.play import play_one
from stratagem.strategies import get_strategy


@dataclass
class FakeSamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = 16
    seed: int | None = None
    skip_special_tokens: bool = True
    prompt_logprobs: int | None = None
    logprobs: int | None = None


@dataclass(frozen=True)
class FakeLoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


class CharTokenizer:
    """One token per character (id = code point); a plain-text chat template."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return SimpleNamespace(input_ids=[ord(c) for c in text])

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


def table_logprob(context: tuple[int, ...], token: int) -> float:
    """A fake model: a stable pseudo-random log-probability of ``token`` after ``context``."""
    digest = hashlib.blake2b(repr((context, token)).encode(), digest_size=4).digest()
    return -0.1 - 5 * int.from_bytes(digest, "big") / 2**32


class FakeLLM:
    """Records what the backend asks; replies with ``reply(prompt_text, seed)`` or, for
    ``prompt_logprobs`` requests, with ``table_logprob`` of every prompt token."""

    reply = staticmethod(lambda prompt, seed: f"I pick CALL\nseed {seed}")

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple[list, list, object]] = []

    def get_tokenizer(self):
        return CharTokenizer()

    def reset_prefix_cache(self):
        self.kwargs["reset"] = True

    def generate(self, prompts, params, lora_request=None, use_tqdm=True):
        params = params if isinstance(params, list) else [params] * len(prompts)
        self.calls.append((prompts, params, lora_request))
        outs = []
        for prompt, p in zip(prompts, params, strict=True):
            ids = prompt["prompt_token_ids"]
            if p.prompt_logprobs is not None:
                lps = [None] + [
                    {ids[i]: SimpleNamespace(logprob=table_logprob(tuple(ids[:i]), ids[i]))}
                    for i in range(1, len(ids))
                ]
                outs.append(SimpleNamespace(prompt_logprobs=lps, outputs=[]))
                continue
            text = self.reply("".join(map(chr, ids)), p.seed)[: p.max_tokens]
            done = SimpleNamespace(
                text=text, token_ids=[ord(c) for c in text], finish_reason="stop"
            )
            outs.append(SimpleNamespace(outputs=[done], num_cached_tokens=3))
        return outs


FAKE = VLLMApi(FakeLLM, FakeSamplingParams, FakeLoRARequest)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "rules"}, {"role": "user", "content": text}]


def test_each_request_carries_its_decision_seed_and_the_sampling_settings():
    backend = VLLMBackend("some/model", api=FAKE)
    seeds = [1, 2**64 + 5, 3]
    gens = backend.generate([chat("a"), chat("b"), chat("c")], Sampling(0.7, 0.9, 40), seeds=seeds)
    prompts, params, lora = backend.engine.calls[-1]
    assert [p.seed for p in params] == [1, (2**64 + 5) % 2**63, 3]
    assert {(p.temperature, p.top_p, p.max_tokens) for p in params} == {(0.7, 0.9, 40)}
    assert prompts[0]["prompt_token_ids"] == backend.prompt_ids(chat("a")) and lora is None
    assert gens[0].prompt_tokens == len(prompts[0]["prompt_token_ids"])
    assert gens[0].prefill_tokens == gens[0].prompt_tokens - 3  # prefix-cache hits
    backend.generate([chat("a")], Sampling(), seeds=[9])
    greedy = backend.engine.calls[-1][1][0]
    assert greedy.temperature == 0.0 and greedy.seed is None
    kwargs = backend.engine.kwargs
    assert kwargs["enable_prefix_caching"] and not kwargs["enable_lora"]
    assert kwargs["model"] == "some/model" and backend.model_id == "some/model"


def test_a_rows_text_depends_only_on_its_prompt_and_seed_whatever_the_batch():
    backend = VLLMBackend("m", api=FAKE)
    backend.engine.reply = lambda prompt, seed: f"{len(prompt)}:{seed}"
    chats = [chat("x" * i) for i in range(6)]
    seeds = [11, 12, 13, 14, 15, 16]
    sampling = Sampling(temperature=1.0)
    batched = [g.text for g in backend.generate(chats, sampling, seeds=seeds)]
    alone = [
        backend.generate([c], sampling, seeds=[s])[0].text
        for c, s in zip(chats, seeds, strict=True)
    ]
    order = [3, 0, 5, 1, 4, 2]
    shuffled = backend.generate(
        [chats[i] for i in order], sampling, seeds=[seeds[i] for i in order]
    )
    assert batched == alone == [g.text for _, g in sorted(zip(order, shuffled, strict=True))]


def test_a_stop_check_cuts_the_text_where_the_answer_is_complete():
    backend = VLLMBackend("m", api=FAKE)
    backend.engine.reply = lambda prompt, seed: "I think so.\nFOLD\nand then more words"
    check = functools.partial(holds_action, legal=("CALL", "FOLD"))
    cut, free = backend.generate([chat("a"), chat("b")], Sampling(), stop=[check, None])
    assert cut.text == "I think so.\nFOLD" and cut.finish_reason == "action"
    assert cut.tokens == len(cut.text) and free.finish_reason == "stop"
    assert free.text == "I think so.\nFOLD\nand then more words"
    decode = "".join
    assert first_stop(list("x CALL"), check, decode) == 6
    assert first_stop(list("nothing"), check, decode) is None


def test_lora_adapters_ride_on_every_request_and_reload_under_a_new_id():
    backend = VLLMBackend("m", adapter="/adapters/sft", api=FAKE)
    assert backend.engine.kwargs["enable_lora"] and backend.model_id == "m+/adapters/sft"
    backend.generate([chat("a")], Sampling())
    assert backend.engine.calls[-1][2] == FakeLoRARequest("adapter-1", 1, "/adapters/sft")
    backend.load_adapter("/adapters/step-2")
    backend.choice_probs([chat("a")], [("CALL", "FOLD")])
    assert backend.engine.calls[-1][2] == FakeLoRARequest("adapter-2", 2, "/adapters/step-2")
    backend.reset_prefix_cache()
    assert backend.engine.kwargs["reset"]
    with pytest.raises(ConfigError, match="one LoRA adapter"):
        VLLMBackend("m", adapter="a,b", api=FAKE)


def test_choice_probs_are_the_restricted_softmax_at_the_branching_points():
    backend = VLLMBackend("m", api=FAKE)
    simple, vectors = backend.choice_probs(
        [chat("a"), chat("b")], [("CALL", "FOLD"), ("[1, 2]", "[1, 3]", "[2, 0]")]
    )
    prompt = tuple(backend.prompt_ids(chat("a")))
    c, f = table_logprob(prompt, ord("C")), table_logprob(prompt, ord("F"))
    assert simple["CALL"] == pytest.approx(math.exp(c) / (math.exp(c) + math.exp(f)))
    prompt = tuple(backend.prompt_ids(chat("b")))
    one, two = (
        table_logprob(prompt + (ord("["),), ord("1")),
        table_logprob(prompt + (ord("["),), ord("2")),
    )
    shared = tuple(ord(x) for x in "[1, ")
    deep2, deep3 = (table_logprob(prompt + shared, ord(d)) for d in "23")
    p_one = math.exp(one) / (math.exp(one) + math.exp(two))
    assert vectors["[2, 0]"] == pytest.approx(1 - p_one)
    assert vectors["[1, 2]"] == pytest.approx(
        p_one * math.exp(deep2) / (math.exp(deep2) + math.exp(deep3))
    )
    params = backend.engine.calls[-1][1][0]
    assert params.prompt_logprobs == 0 and params.max_tokens == 1


def test_trie_probs_equal_the_hf_backends_masked_decode():
    """The naive equivalent: hf's trie over full log-probability vectors."""
    torch = pytest.importorskip("torch")
    from stratagem.backends.trie import Trie as _Trie

    rng = random.Random(3)
    for _ in range(50):
        choices = {tuple(rng.randrange(6) for _ in range(rng.randint(1, 4))) for _ in range(4)}
        choices = [list(c) for c in choices if not any(
            o != c and o[: len(c)] == c for o in choices
        )]  # fmt: skip
        table: dict[tuple[int, ...], object] = {}

        def dist(context, table=table):
            if context not in table:
                g = torch.Generator().manual_seed(hash(context) % 2**31)
                table[context] = torch.log_softmax(torch.randn(6, generator=g), -1)
            return table[context]

        trie = _Trie.build(choices)
        naive = [
            trie.score(ids, [dist(tuple(ids[:p])) for p in range(len(ids))]) for ids in choices
        ]
        naive = [s / sum(naive) for s in naive]
        ours = trie_probs(choices, lambda j, p, cs=choices: float(dist(tuple(cs[j][:p]))[cs[j][p]]))
        assert ours == pytest.approx(naive, abs=1e-6)


def test_an_llm_agent_plays_through_the_vllm_backend():
    game = get_game("kuhn")
    backend = VLLMBackend("m", api=FAKE)
    backend.engine.reply = lambda prompt, seed: "hmm"  # never an action: the fallback decides
    agent = LLMAgent(backend, game)
    trace = play_one(game, [agent, get_strategy("kuhn", "NashApprox")], seed=4)
    mine = [d for d in trace.decisions if d.seat == 0]
    assert mine and all(d.status == "fallback" and d.probs for d in mine)
    assert all(abs(sum(d.probs.values()) - 1) < 1e-9 for d in mine)


def test_importing_the_backend_does_not_import_vllm():
    code = "import stratagem.backends.vllm, sys; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_without_vllm_the_backend_says_how_to_install_it():
    with pytest.raises(StratagemError, match=r"pip install 'stratagem\[vllm\]'"):
        VLLMBackend("m")


def _gpu() -> bool:
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


gpu = pytest.mark.skipif(not _gpu(), reason="needs vLLM and a GPU")


@pytest.fixture(scope="module")
def engine():
    return VLLMBackend("embedded", gpu_memory_utilization=0.3, max_model_len=2048)


@gpu
def test_gpu_sampled_text_is_the_same_alone_and_in_a_batch(engine):
    game = get_game("ipd")
    obs = [game.new_episode(i).observe(0) for i in range(6)]
    from stratagem.game import chat_for

    chats, seeds = [chat_for(o) for o in obs], [o.seed for o in obs]
    sampling = Sampling(temperature=1.0, max_new_tokens=16)
    batched = [g.text for g in engine.generate(chats, sampling, seeds=seeds)]
    alone = [
        engine.generate([c], sampling, seeds=[s])[0].text for c, s in zip(chats, seeds, strict=True)
    ]
    assert batched == alone


@gpu
def test_gpu_choice_probs_are_a_distribution(engine):
    game = get_game("kuhn")
    from stratagem.game import chat_for

    obs = game.new_episode(0).observe(0)
    (probs,) = engine.choice_probs([chat_for(obs)], [obs.legal])
    assert set(probs) == set(obs.legal) and abs(sum(probs.values()) - 1) < 1e-6


def test_vllm_agent_specs_are_llm_agents_and_say_what_they_need():
    from stratagem.agents.spec import KINDS, is_llm, make_agent

    assert "vllm" in KINDS and is_llm("vllm") and is_llm("vllm:Qwen/Qwen2.5-1.5B-Instruct")
    if _gpu():
        pytest.skip("vLLM and a GPU are here: the spec builds a real engine")
    with pytest.raises(ConfigError, match=r"agent 'vllm:m': .*(pip install|GPU)"):
        make_agent("vllm:m", "kuhn")
    with pytest.raises(ConfigError, match="no such model folder"):
        make_agent("vllm:./no/such/folder", "kuhn")


def test_a_vllm_spec_builds_an_llm_agent_on_the_engine(monkeypatch):
    from stratagem.agents import spec
    from stratagem.backends import vllm

    monkeypatch.setattr(vllm, "vllm_unavailable", lambda: None)
    monkeypatch.setattr(vllm, "vllm_api", lambda: FAKE)
    agent = spec.make_agent("vllm:m", "kuhn", spec.LLMOptions(temperature=0.7))
    assert isinstance(agent, LLMAgent) and isinstance(agent.backend, VLLMBackend)
    assert agent.sampling.temperature == 0.7 and "m" in agent.name
