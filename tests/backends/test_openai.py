"""The openai backend against a scripted fault server on 127.0.0.1 (RELIABILITY B, C)."""

from __future__ import annotations

import ast
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from stratagem.backends.base import Sampling
from stratagem.backends.cache import ResponseCache
from stratagem.backends.openai import BackendFatalError, OpenAIBackend
from tests.backends.fault_server import FaultServer, completion

CHAT = [{"role": "system", "content": "rules"}, {"role": "user", "content": "your move"}]


def backend(server, **kw):
    kw.setdefault("backoff_seconds", 0.01)
    kw.setdefault("attempt_timeout", 5)
    return OpenAIBackend("fake", server.url, **kw)


def one(b, sampling=Sampling(), seed=1, chat=CHAT):
    return b.generate([chat], sampling, seeds=[seed])[0]


@pytest.mark.parametrize("code", [408, 409, 429, 500, 502, 503])
def test_retryable_statuses_are_retried(code):
    with FaultServer([("status", code), ("status", code), ("ok", "DEFECT")]) as s:
        gen = one(backend(s, max_retries=3))
    assert gen.text == "DEFECT" and len(s.requests) == 3
    assert gen.info["retries"] == [code, code]


@pytest.mark.parametrize("code", [400, 404, 422])
def test_client_errors_are_not_retried_and_end_only_that_decision(code):
    with FaultServer([("status", code)]) as s:
        gen = one(backend(s, max_retries=5))
    assert len(s.requests) == 1
    assert gen.finish_reason == "error" and gen.info["http_status"] == code


def test_retry_after_is_honoured():
    with FaultServer([("status", 429, {"retry-after": "1"}), ("ok", "COOPERATE")]) as s:
        start = time.monotonic()
        gen = one(backend(s))
        elapsed = time.monotonic() - start
    assert gen.text == "COOPERATE" and elapsed >= 1.0


def test_retry_after_ms_is_honoured():
    with FaultServer([("status", 503, {"retry-after-ms": "300"}), ("ok", "COOPERATE")]) as s:
        start = time.monotonic()
        one(backend(s))
        assert time.monotonic() - start >= 0.3


def test_bad_key_stops_the_run_fast_with_a_clear_message():
    with FaultServer([("status", 401)]) as s:
        start = time.monotonic()
        with pytest.raises(BackendFatalError, match=r"127\.0\.0\.1.*OPENAI_API_KEY"):
            one(backend(s))
        assert time.monotonic() - start < 2 and len(s.requests) == 1


def test_budget_is_exactly_max_retries_plus_one():
    with FaultServer([("status", 500)]) as s:
        start = time.monotonic()
        gen = one(backend(s, max_retries=2))
        assert time.monotonic() - start < 2
    assert len(s.requests) == 3 and gen.finish_reason == "error"


def test_more_retries_than_the_sdk_default():
    with FaultServer([("status", 429)] * 3 + [("ok", "DEFECT")]) as s:
        gen = one(backend(s, max_retries=5))
    assert gen.text == "DEFECT" and len(s.requests) == 4


def test_hung_server_never_hangs_the_run():
    with FaultServer([("sleep", 60)]) as s:
        start = time.monotonic()
        gen = one(backend(s, attempt_timeout=1, max_retries=1))
        elapsed = time.monotonic() - start
    assert elapsed < 30  # far below the 60 s the server would hang for, with room for a busy CPU
    assert gen.finish_reason == "error" and gen.info["error"].startswith("timeout")


def test_concurrency_limit_is_honoured():
    with FaultServer([("ok", "COOPERATE")], delay=0.25) as s:
        b = backend(s, concurrency=4)
        chats = [[*CHAT, {"role": "user", "content": str(i)}] for i in range(40)]
        gens = b.generate(chats, Sampling(), seeds=list(range(40)))
    assert len(gens) == 40 and 2 <= s.max_in_flight <= 4


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (("body", completion(None)), "null content"),
        (("body", {**completion("x"), "choices": []}), "no choices"),
        (("ok", "", "stop"), "empty content"),
    ],
)
def test_malformed_successes_are_recorded_not_raised(action, expected):
    with FaultServer([action]) as s:
        gen = one(backend(s))
    assert gen.text == "" and gen.finish_reason == "empty" and gen.info["malformed"] == expected


def test_truncated_and_reasoning_only_answers():
    with FaultServer([("ok", "I think", "length")]) as s:
        gen = one(backend(s))
    assert gen.finish_reason == "length" and gen.text == "I think"
    with FaultServer([("ok", "<think>still thinking", "stop")]) as s:
        assert one(backend(s)).text == "<think>still thinking"


def test_invalid_json_is_retried_then_recorded():
    with FaultServer([("raw", b"{not json"), ("ok", "DEFECT")]) as s:
        assert one(backend(s)).text == "DEFECT"
    with FaultServer([("raw", b"<html>")]) as s:
        gen = one(backend(s, max_retries=1))
    assert gen.finish_reason == "error" and len(s.requests) == 2


def test_lone_surrogate_survives_and_a_huge_body_is_a_recorded_error():
    body = json.dumps(completion("x")).replace('"x"', '"bad \\ud800 DEFECT"').encode()
    with FaultServer([("raw", body)]) as s:
        gen = one(backend(s))
    assert gen.text.endswith("DEFECT") and "\ud800" not in gen.text
    # a 10 MB body is over the size limit (RELIABILITY B5b): refused, not retried, not a crash
    with FaultServer([("ok", "A" * 10_000_000 + "\nDEFECT")]) as s:
        gen = one(backend(s))
    assert gen.finish_reason == "error" and "KiB limit" in gen.info["error"]
    assert len(s.requests) == 1


def test_cache_key_has_what_changes_the_output_and_nothing_else(tmp_path):
    with FaultServer([("ok", "COOPERATE")]) as s:
        cache = str(tmp_path / "c.sqlite")
        b = backend(s, cache=cache)
        one(b)
        one(b)
        assert len(s.requests) == 1
        for sampling, seed, chat in [
            (Sampling(temperature=0.5), 1, CHAT),
            (Sampling(max_new_tokens=9), 1, CHAT),
            (Sampling(top_p=0.9), 1, CHAT),
            (Sampling(), 2, CHAT),
            (Sampling(), 1, [CHAT[0], {"role": "user", "content": "your move!"}]),
        ]:
            before = len(s.requests)
            one(b, sampling, seed, chat)
            assert len(s.requests) == before + 1
        runtime = backend(s, cache=cache, concurrency=2, attempt_timeout=3, max_retries=1)
        before = len(s.requests)
        one(runtime)
        assert len(s.requests) == before


def test_sampled_repeats_never_collapse_and_replay_exactly(tmp_path):
    counter = iter(range(10_000))
    with FaultServer(handler=lambda req, i: ("ok", f"reply {next(counter)}")) as s:
        cache = str(tmp_path / "c.sqlite")
        b = backend(s, cache=cache)
        first = [one(b, Sampling(temperature=1.0), seed=i).text for i in range(20)]
        assert len(set(first)) == 20
        n = len(s.requests)
        again = [
            one(backend(s, cache=cache), Sampling(temperature=1.0), seed=i).text for i in range(20)
        ]
        assert again == first and len(s.requests) == n


def test_only_complete_successes_are_cached(tmp_path):
    cache = str(tmp_path / "c.sqlite")
    with FaultServer([("status", 500), ("ok", "DEFECT")]) as s:
        assert one(backend(s, cache=cache)).text == "DEFECT"
    assert len(ResponseCache(cache)) == 1
    with FaultServer(
        [("ok", "blocked", "content_filter"), ("ok", "blocked", "content_filter")]
    ) as s:
        one(backend(s, cache=cache), seed=5)
        one(backend(s, cache=cache), seed=5)
        assert len(s.requests) == 2


def test_cache_hits_are_marked(tmp_path):
    cache = str(tmp_path / "c.sqlite")
    with FaultServer([("ok", "DEFECT")]) as s:
        first = one(backend(s, cache=cache))
        hit = one(backend(s, cache=cache))
    assert "cached" not in first.info and hit.info["cached"] is True
    assert hit.info["system_fingerprint"] == "fp-test"


def test_corrupt_cache_entry_is_a_miss_with_a_warning(tmp_path):
    path = tmp_path / "c.sqlite"
    with FaultServer([("ok", "DEFECT")]) as s:
        one(backend(s, cache=str(path)))
        import sqlite3

        db = sqlite3.connect(path)
        db.execute("UPDATE responses SET value = 'garbage{'")
        db.commit()
        db.close()
        with pytest.warns(UserWarning, match="corrupt entry"):
            gen = one(backend(s, cache=str(path)))
        assert gen.text == "DEFECT" and len(s.requests) == 2


def _writer(path, start):
    cache = ResponseCache(path)
    for i in range(start, start + 1000):
        cache.put(f"k{i}", {"text": str(i)})


def test_two_processes_write_concurrently(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ResponseCache(path).close()
    procs = [
        multiprocessing.get_context("spawn").Process(target=_writer, args=(path, s))
        for s in (0, 1000)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    cache = ResponseCache(path)
    assert len(cache) == 2000 and cache.get("k1999") == {"text": "1999"}


def test_cache_module_never_pickles():
    src = Path(__file__).resolve().parents[2] / "src/stratagem/backends/cache/__init__.py"
    names = {n.id for n in ast.walk(ast.parse(src.read_text())) if isinstance(n, ast.Name)}
    imports = {
        a.name
        for n in ast.walk(ast.parse(src.read_text()))
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert "pickle" not in names | imports


def test_api_key_never_reaches_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-XYZ")
    with FaultServer([("ok", "DEFECT")]) as s:
        b = backend(s, cache=str(tmp_path / "c.sqlite"))
        one(b)
        b.close()
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert b"sk-canary" not in f.read_bytes(), f


def test_no_tls_verification_is_ever_disabled():
    src = Path(__file__).resolve().parents[2] / "src"
    for f in src.rglob("*.py"):
        text = f.read_text()
        assert "verify=False" not in text and "CERT_NONE" not in text, f


def test_logprobs_give_action_probabilities():
    logprobs = {
        "content": [
            {
                "token": "DEF",
                "logprob": -0.1,
                "top_logprobs": [
                    {"token": "DEF", "logprob": -0.2231435513},
                    {"token": "CO", "logprob": -1.6094379124},
                    {"token": "Hmm", "logprob": -3.0},
                ],
            }
        ]
    }
    body = completion("DEF")
    body["choices"][0]["logprobs"] = logprobs
    with FaultServer([("body", body)]) as s:
        probs = backend(s).choice_probs([CHAT], [("COOPERATE", "DEFECT")])[0]
    assert probs["DEFECT"] == pytest.approx(0.8 / (0.8 + 0.2))
    assert s.requests[0]["logprobs"] is True and s.requests[0]["max_tokens"] == 1


def test_without_logprobs_a_constrained_reask_decides():
    with FaultServer([("ok", "no logprobs here"), ("ok", "DEFECT")]) as s:
        probs = backend(s).choice_probs([CHAT], [("COOPERATE", "DEFECT")])[0]
    assert probs == {"COOPERATE": 0.0, "DEFECT": 1.0}
    assert "exactly one of" in s.requests[1]["messages"][-1]["content"]


def test_native_tool_calls_are_validated_like_code():
    from stratagem.agents.llm import LLMAgent
    from stratagem.games.bargaining import Bargaining, Invalid

    def tool_reply(calls):
        body = completion(None, "tool_calls")
        body["choices"][0]["message"]["tool_calls"] = [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
        return ("body", body)

    game = Bargaining()
    obs = game.new_episode(0).observe(0)
    good = tool_reply([("make_offer", {"price": 120}), ("wait_for_response", {})])
    bad = tool_reply([("make_offer", {"price": True}), ("wait_for_response", {})])
    with FaultServer([good, bad]) as s:
        agent = LLMAgent(backend(s), game)
        first = agent.act([obs])[0]
        second = agent.act([obs])[0]
    assert first.status == "ok"
    assert game.token(first.action) == "make_offer(price=120.0); wait_for_response()"
    assert isinstance(second.action, Invalid) and "price must be a number" in second.action.reason
    names = [t["function"]["name"] for t in s.requests[0]["tools"]]
    assert names == [
        "make_offer",
        "respond_to_offer",
        "send_message",
        "search_price",
        "quit_negotiation",
        "wait_for_response",
        "wait_for_time_period",
    ]
