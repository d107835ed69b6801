"""The llama.cpp engine: GGUF conversion, batched decoding with KV reuse, and the backend on top,
checked against transformers on a tiny random Llama (seconds) and the embedded SmolLM2 (slow)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stratagem.agents.llm import chat_for
from stratagem.backends.base import Sampling
from stratagem.backends.llamacpp.engine import KVSlots, Placement, llamacpp_unavailable
from stratagem.errors import ConfigError, StratagemError
from stratagem.games import get_game
from tests.tiny_models import SIZES, tiny_llama_config

needs_llamacpp = pytest.mark.skipif(
    llamacpp_unavailable() is not None, reason="llama-cpp-python is not installed"
)


# ---- which sequence a prompt continues (pure bookkeeping) ----


def test_a_prompt_continues_the_sequence_that_holds_its_prefix_in_place():
    slots = KVSlots(n_seq=4, n_cells=100)
    placed, evicted = slots.place([[1, 2, 3], [7, 8]], keep=[2, 1], reserve=0)
    assert placed == [Placement(0, 0), Placement(1, 0)] and evicted == []
    slots.extend(0, [1, 2, 3, 4])  # the prompt and one generated token
    slots.extend(1, [7, 8])
    placed, _ = slots.place([[1, 2, 3, 4, 5, 6]], keep=[5], reserve=0)
    assert placed == [Placement(0, 4)]  # its own earlier turn, nothing recomputed
    assert slots.used == 6


def test_a_shared_prefix_is_copied_into_a_free_sequence_sharing_its_cells():
    slots = KVSlots(n_seq=4, n_cells=100)
    slots.place([[1, 2, 3, 4]], keep=[3], reserve=0)
    slots.extend(0, [1, 2, 3, 4])
    # two rows in one batch: the first continues sequence 0 (which holds exactly its prefix),
    # the second shares 3 tokens with it and copies them; sequence 0 is never cut
    placed, _ = slots.place([[1, 2, 3, 4, 9], [1, 2, 3, 5]], keep=[4, 3], reserve=0)
    assert placed == [Placement(0, 4), Placement(1, 3, source=0)]
    assert slots.tokens[1] == [1, 2, 3] and slots.used == 4  # copied cells are shared
    slots.extend(1, [5])
    assert slots.used == 5
    # a row that is not a continuation of any sequence never truncates one: it copies
    placed, _ = slots.place([[1, 2, 7]], keep=[2], reserve=0)
    assert placed == [Placement(2, 2, source=0)] and slots.tokens[0] == [1, 2, 3, 4]


def test_at_least_the_token_before_the_wanted_logits_is_computed():
    slots = KVSlots(n_seq=2, n_cells=100)
    slots.place([[1, 2, 3]], keep=[2], reserve=0)
    slots.extend(0, [1, 2, 3])
    assert slots.place([[1, 2, 3]], keep=[2], reserve=0)[0] == [Placement(1, 2, source=0)]
    assert slots.place([[1, 2, 3, 4]], keep=[1], reserve=0)[0] == [Placement(1, 1, source=0)]


def test_least_recently_used_sequences_are_evicted_for_room_and_for_slots():
    slots = KVSlots(n_seq=2, n_cells=10)
    slots.place([[1, 1, 1]], keep=[2], reserve=0)
    slots.extend(0, [1, 1, 1])
    slots.place([[2, 2, 2]], keep=[2], reserve=0)
    slots.extend(1, [2, 2, 2])
    placed, evicted = slots.place([[3, 3]], keep=[1], reserve=4)  # 6 cells used, 6 needed
    assert evicted == [0] and placed == [Placement(0, 0)]
    assert sorted(slots.tokens) == [0, 1] and slots.used == 3
    with pytest.raises(StratagemError, match="KV cache too small"):
        slots.place([[4] * 8], keep=[7], reserve=4)


# ---- the engine on a tiny random Llama ----


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random Llama with the embedded tokenizer and its own output head (tied, the head
    repeats the last token), and its f32 GGUF."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    from stratagem.backends.embedded import embedded_dir
    from stratagem.training.engines.gguf import write_model_gguf

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    config = tiny_llama_config(
        tokenizer, tie_word_embeddings=False, architectures=["LlamaForCausalLM"]
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # logits large enough that argmax is not a tie of rounding errors
        model.lm_head.weight.mul_(5)
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_model_gguf(model.state_dict(), config, tokenizer, path)
    return model, tokenizer, path


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


ROWS = [
    [1, 5, 6, 7, 8, 9, 10, 11, 12],
    [1, 5, 6, 7, 8, 30, 31],
    [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
]


@needs_llamacpp
def test_the_gguf_round_trip_gives_transformers_logits(tiny):
    from stratagem.backends.llamacpp.engine import LlamaCppEngine

    model, _, path = tiny
    engine = LlamaCppEngine(path, n_ctx=512, n_seq=8, threads=1, kv_dtype="f32")
    _, logits = engine.prefill(ROWS, [0] * len(ROWS))
    for row, got in zip(ROWS, logits, strict=True):
        want = logits_of(model, row)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-3)


@needs_llamacpp
def test_a_qwen2_model_converts_too(tiny, tmp_path):
    """Qwen2 (biases on the query, key and value projections; halves rotated as in
    transformers, so nothing is permuted)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from stratagem.backends.llamacpp.engine import LlamaCppEngine
    from stratagem.training.engines.gguf import write_model_gguf

    _, tokenizer, _ = tiny
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        **SIZES,
        tie_word_embeddings=True,
        architectures=["Qwen2ForCausalLM"],
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("proj.bias"):
                p.normal_(0, 0.5)  # initialised at zero: make them matter
    path = write_model_gguf(model.state_dict(), config, tokenizer, tmp_path / "qwen.gguf")
    engine = LlamaCppEngine(path, n_ctx=64, n_seq=1, threads=1, kv_dtype="f32")
    got = engine.prefill(ROWS[:1], [0])[1][0]
    np.testing.assert_allclose(got, logits_of(model, ROWS[0]), atol=2e-3)


@needs_llamacpp
def test_reused_prefixes_give_the_logits_of_a_fresh_computation(tiny):
    """Naive equivalent: every row alone in a fresh engine. Rows continue, copy and share
    prefixes with cached sequences and with each other (in any order), logits unchanged."""
    from stratagem.backends.llamacpp.engine import LlamaCppEngine

    _, _, path = tiny
    fresh = []
    for row in ROWS:
        alone = LlamaCppEngine(path, n_ctx=64, n_seq=1, threads=1, kv_dtype="f32")
        fresh.append(alone.prefill([row], [len(row) - 1])[1][0])
    engine = LlamaCppEngine(path, n_ctx=512, n_seq=4, threads=1, kv_dtype="f32")
    placed, first = engine.prefill(ROWS[:1], [len(ROWS[0]) - 1])
    long_prompt = [1, 5, 6] + list(range(100, 140))  # shared by a batch: computed once
    batch = [ROWS[2], ROWS[1], long_prompt + [7], long_prompt + [8]]
    placed, logits = engine.prefill(batch, [len(r) - 1 for r in batch])
    assert placed[0] == Placement(0, 9)  # continues its cached prefix in place
    assert placed[1].source == 0 and placed[1].start == 5  # copies the shared part
    assert placed[3].source == placed[2].seq and placed[3].start == len(long_prompt)
    np.testing.assert_allclose(first[0], fresh[0], atol=1e-4)
    np.testing.assert_allclose(logits[0], fresh[2], atol=1e-4)
    np.testing.assert_allclose(logits[1], fresh[1], atol=1e-4)


@needs_llamacpp
@pytest.mark.parametrize("dtype, atol", [("f16", 0.01), ("bf16", 0.05)])  # measured: 1.5e-3, 1.2e-2
def test_half_precision_ggufs_stay_near_transformers(tiny, tmp_path, dtype, atol):
    from stratagem.backends.llamacpp.engine import LlamaCppEngine
    from stratagem.training.engines.gguf import write_model_gguf

    model, tokenizer, _ = tiny
    path = write_model_gguf(
        model.state_dict(), model.config, tokenizer, tmp_path / "m.gguf", dtype=dtype
    )
    engine = LlamaCppEngine(path, n_ctx=64, n_seq=1, threads=1)
    got = engine.prefill(ROWS[:1], [0])[1][0]
    want = logits_of(model, ROWS[0])
    assert 0 < np.abs(got - want).max() < atol
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.9


def test_unsupported_architectures_are_refused_in_one_line():
    from transformers import GPT2Config

    from stratagem.training.engines.gguf import architecture

    with pytest.raises(ConfigError, match="converts LlamaForCausalLM, Qwen2ForCausalLM models"):
        architecture(GPT2Config(architectures=["GPT2LMHeadModel"]))


# ---- the backend ----


def chats(n: int, game: str = "ipd"):
    g = get_game(game)
    return [chat_for(g.new_episode(i).observe(0)) for i in range(n)]


@pytest.fixture(scope="module")
def backends(tiny):
    from stratagem.backends.hf import HFBackend
    from stratagem.backends.llamacpp import LlamaCppBackend

    model, tokenizer, path = tiny
    hf = HFBackend.from_model(model, tokenizer, "tiny", prefix_reuse=True)
    cpp = LlamaCppBackend(
        path, tokenizer, model_id="tiny", return_ids=True, threads=1, kv_dtype="f32", n_ctx=8192
    )
    return hf, cpp


@needs_llamacpp
def test_greedy_answers_and_prompt_ids_are_the_hf_backends(backends):
    hf, cpp = backends
    sampling = Sampling(0.0, 1.0, 8)
    want = hf.generate(chats(3), sampling)
    got = cpp.generate(chats(3), sampling)
    for w, g in zip(want, got, strict=True):
        assert g.info["prompt_ids"] == w.info["prompt_ids"]
        assert g.info["token_ids"] == w.info["token_ids"] and g.text == w.text
        assert g.finish_reason == w.finish_reason and g.tokens == w.tokens == 8
    # later rounds' prompts reuse the cache: the first round's rules were computed once
    assert [g.prefill_tokens for g in got][1:] == [1, 1]


def test_rows_are_sampled_as_one_multinomial_each_from_their_own_generator():
    """Naive equivalent: ``torch.multinomial(softmax(scores / T), 1, generator=g_row)`` per row."""
    from stratagem.backends.hf.sampling import sample_rows

    scores = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    picked, logps = sample_rows(scores, [torch.Generator().manual_seed(s) for s in (1, 2, 3)], 0.7)
    for i, seed in enumerate((1, 2, 3)):
        probs = torch.softmax(scores[i] / 0.7, -1)
        want = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed))[0]
        assert picked[i] == want
        assert torch.isclose(logps[i], probs[want].log())


@needs_llamacpp
def test_sampled_answers_are_the_hf_backends_for_the_same_seeds(backends):
    hf, cpp = backends
    sampling = Sampling(1.0, 1.0, 6)
    want = hf.generate(chats(3), sampling, seeds=[5, 6, 7])
    got = cpp.generate(chats(3), sampling, seeds=[5, 6, 7])
    assert [g.info["token_ids"] for g in got] == [w.info["token_ids"] for w in want]
    assert len({tuple(g.info["token_ids"]) for g in got}) == 3


@needs_llamacpp
def test_thread_counts_change_no_logit(tiny):
    from stratagem.backends.llamacpp.engine import LlamaCppEngine

    _, _, path = tiny
    engine = LlamaCppEngine(path, n_ctx=512, n_seq=4, threads=1)
    one = engine.prefill(ROWS, [0] * len(ROWS))[1]
    engine.clear()
    engine.set_threads(2)
    two = engine.prefill(ROWS, [0] * len(ROWS))[1]
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))


@needs_llamacpp
def test_sampled_rows_depend_on_their_chat_and_seed_only(backends):
    _, cpp = backends
    sampling = Sampling(1.0, 1.0, 6)
    cpp.reset_prefix_cache()
    both = cpp.generate(chats(2), sampling, seeds=[11, 12])
    cpp.reset_prefix_cache()
    alone = cpp.generate(chats(2)[1:], sampling, seeds=[12])
    assert alone[0].info["token_ids"] == both[1].info["token_ids"]
    assert both[0].info["token_ids"] != both[1].info["token_ids"]


@needs_llamacpp
def test_sampled_log_probs_are_the_models_at_the_temperature(backends, tiny):
    from stratagem.training.logprobs import sequence_logprobs

    model, _, _ = tiny
    _, cpp = backends
    gens = cpp.generate(chats(2), Sampling(0.7, 1.0, 6), seeds=[3, 4])
    for g in gens:
        prompt, ids = g.info["prompt_ids"], g.info["token_ids"]
        positions = list(range(len(prompt), len(prompt) + len(ids)))
        with torch.no_grad():
            want = sequence_logprobs(model, prompt + ids, positions, temperature=0.7)
        assert torch.allclose(torch.tensor(g.info["token_logprobs"]), want, atol=2e-3)


@needs_llamacpp
def test_stop_checks_and_end_tokens_end_a_row(backends):
    _, cpp = backends
    first = cpp.generate(chats(1), Sampling(0.0, 1.0, 8))[0]
    cut = cpp._decode(first.info["token_ids"][:3])
    gen = cpp.generate(chats(1), Sampling(0.0, 1.0, 8), stop=[lambda text: text == cut])[0]
    assert gen.finish_reason == "action" and gen.info["token_ids"] == first.info["token_ids"][:3]
    saved = cpp.stop_ids
    cpp.stop_ids = frozenset({first.info["token_ids"][2]})
    try:
        gen = cpp.generate(chats(1), Sampling(0.0, 1.0, 8))[0]
    finally:
        cpp.stop_ids = saved
    assert gen.finish_reason == "stop" and gen.info["token_ids"] == first.info["token_ids"][:2]


@needs_llamacpp
def test_a_batch_too_big_for_the_cache_runs_in_parts_with_the_same_answers(backends, tiny):
    from stratagem.backends.llamacpp import LlamaCppBackend

    _, cpp = backends
    _, tokenizer, path = tiny
    small = LlamaCppBackend(
        path, tokenizer, model_id="tiny", return_ids=True, threads=1, kv_dtype="f32", n_ctx=512
    )
    asks = chats(1, "ipd") + chats(1, "kuhn") + chats(1, "auction")
    sizes = [len(small._tokenize(c)[0]) for c in asks]
    assert sum(sizes) > 512 and max(sizes) + 8 < 512  # together too big, each alone fits
    sampling = Sampling(0.0, 1.0, 8)
    got = small.generate(asks, sampling)
    want = cpp.generate(asks, sampling)
    assert [g.info["token_ids"] for g in got] == [w.info["token_ids"] for w in want]
    with pytest.raises(StratagemError, match="KV cache too small"):
        small.generate(asks[:1], Sampling(0.0, 1.0, 512))
    # the fallback's scoring too (a 64-episode IPD batch overflowed it)
    choices = [("COOPERATE", "DEFECT"), ("PASS", "BET"), ("BID", "PASS")]
    for g, w in zip(
        small.choice_probs(asks, choices), cpp.choice_probs(asks, choices), strict=True
    ):
        assert g.keys() == w.keys()
        assert all(abs(g[k] - w[k]) < 1e-3 for k in g), (g, w)


@needs_llamacpp
def test_choice_distributions_are_the_hf_backends(backends):
    hf, cpp = backends
    tokenizer = hf.tokenizer
    shared = ("aaa b", "aaa c", "zzz")  # two share their first sub-tokens
    ids = [tokenizer(c, add_special_tokens=False).input_ids for c in shared]
    assert ids[0][0] == ids[1][0] and ids[0] != ids[1]
    asks = chats(2)
    choices = [("COOPERATE", "DEFECT"), shared]
    want = hf.choice_probs(asks, choices)
    got = cpp.choice_probs(asks, choices)
    for w, g in zip(want, got, strict=True):
        assert list(g) == list(w)
        assert np.allclose(list(g.values()), list(w.values()), atol=1e-3)


# ---- the embedded model ----


@needs_llamacpp
@pytest.mark.slow
def test_the_embedded_model_converts_to_the_same_greedy_answers(tmp_path):
    from stratagem.backends.hf import HFBackend
    from stratagem.training.engines.llamacpp import TrainerLlamaCppBackend
    from stratagem.training.policy import load_policy
    from stratagem.training.sepo.trainer import SEPOArgs

    policy, tokenizer = load_policy(SEPOArgs())
    policy.eval()
    hf = HFBackend.from_model(policy, tokenizer, "smol", prefix_reuse=True)
    cpp = TrainerLlamaCppBackend(policy, tokenizer, tmp_path, model_id="smol", kv_dtype="f32")
    sampling = Sampling(0.0, 1.0, 16)
    asks = chats(2) + chats(2, "kuhn")
    want, got = hf.generate(asks, sampling), cpp.generate(asks, sampling)
    assert [g.text for g in got] == [w.text for w in want]
    assert [g.info["prompt_ids"] for g in got] == [w.info["prompt_ids"] for w in want]
    prompt = want[0].info["prompt_ids"]
    with torch.no_grad():
        reference = policy(torch.tensor([prompt])).logits[0, -1].numpy()
    cpp.reset_prefix_cache()
    logits = cpp.engine.prefill([prompt], [len(prompt) - 1])[1][0][0]
    assert np.abs(logits - reference).max() < 0.05
