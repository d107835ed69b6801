"""The openai backend against hostile servers on 127.0.0.1 (RELIABILITY B3b, B5b and issue 11):
trickled responses, unbounded bodies and completions, unusable Retry-After values, bad base URLs,
and calls that always fail."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from stratagem.backends.base import Sampling
from stratagem.backends.cache import ResponseCache
from stratagem.backends.openai import MAX_RETRY_AFTER_SECONDS, OpenAIBackend
from stratagem.backends.openai.http import (
    BASE_RESPONSE_BYTES,
    BYTES_PER_TOKEN,
    MAX_RESPONSE_BYTES,
    response_byte_limit,
    retry_after,
)
from stratagem.backends.openai.replies import CHARS_PER_TOKEN
from stratagem.errors import ConfigError
from tests.backends.fault_server import FaultServer, completion

CHAT = [{"role": "system", "content": "rules"}, {"role": "user", "content": "your move"}]


def backend(server, **kw):
    kw.setdefault("backoff_seconds", 0.01)
    kw.setdefault("attempt_timeout", 5)
    return OpenAIBackend("fake", server.url, **kw)


def one(b, sampling=Sampling(), seed=1, **kw):
    return b.generate([CHAT], sampling, seeds=[seed], **kw)[0]


def test_a_trickling_body_is_cut_at_the_attempt_deadline():
    # one body byte a second never trips a read timeout of 2 s, only a deadline for the whole
    with FaultServer([("trickle", 1.0), ("trickle", 1.0), ("ok", "DEFECT")]) as s:
        b = backend(s, attempt_timeout=2, max_retries=1)
        gen = one(b)
        ended = time.monotonic()
        first, second = s.arrivals[:2]
        assert second - first <= 2 + 1 and ended - second <= 2 + 1
        assert gen.finish_reason == "error" and gen.info["error"] == "timeout after 2 attempts"
        assert one(b, seed=2).text == "DEFECT"  # the run goes on: cancelled attempts left no mess


def test_trickled_headers_are_cut_at_the_deadline_too():
    with FaultServer([("trickle_headers", 0.5)]) as s:
        start = time.monotonic()
        gen = one(backend(s, attempt_timeout=1, max_retries=0))
        assert time.monotonic() - start <= 1 + 1
    assert gen.finish_reason == "error" and gen.info["error"].startswith("timeout")


def test_no_attempt_outlives_the_retry_budget():
    with FaultServer([("sleep", 30)]) as s:
        start = time.monotonic()
        gen = one(backend(s, attempt_timeout=20, retry_timeout=1, max_retries=3))
        assert time.monotonic() - start <= 1 + 1
    assert gen.finish_reason == "error" and gen.info["error"].startswith("timeout")


@pytest.mark.parametrize("send_length", [True, False])
def test_an_oversized_body_is_refused_as_it_streams_in(send_length):
    with FaultServer([("huge", 50_000_000, send_length)]) as s:
        start = time.monotonic()
        gen = one(backend(s))
        assert time.monotonic() - start < 5
    assert gen.finish_reason == "error" and gen.info["http_status"] == 200
    assert "KiB limit" in gen.info["error"] and len(s.requests) == 1  # refused, not retried


def test_the_body_limit_grows_with_max_tokens_up_to_the_cap():
    def limit(body):
        return response_byte_limit(json.dumps(body).encode())

    assert limit({"max_tokens": 64}) == BASE_RESPONSE_BYTES + 64 * BYTES_PER_TOKEN
    assert limit({"max_tokens": 10**9}) == MAX_RESPONSE_BYTES
    assert limit({"messages": []}) == limit({"max_tokens": "x"}) == MAX_RESPONSE_BYTES
    assert response_byte_limit(b"not json") == MAX_RESPONSE_BYTES
    # a real answer (16 characters a token, each JSON-escaped as \uXXXX) fits with room to spare
    assert 16 * 6 * 64 + 1000 < limit({"max_tokens": 64})


def test_a_compressed_body_is_refused_and_identity_is_asked_for():
    bomb = json.dumps(completion("A" * 20_000_000)).encode()  # ~20 KB once gzipped
    with FaultServer([("gzip", bomb)]) as s:
        gen = one(backend(s))
    assert gen.finish_reason == "error" and "gzip-encoded" in gen.info["error"]
    assert s.headers[0]["accept-encoding"] == "identity"


def test_a_completion_ignoring_max_tokens_is_truncated_before_it_is_used(tmp_path):
    cache = str(tmp_path / "c.sqlite")
    sampling = Sampling(max_new_tokens=8)
    with FaultServer([("ok", "DEFECT " * 30_000)]) as s:  # 210 KB for 8 tokens
        gen = one(backend(s, cache=cache), sampling)
        again = one(backend(s, cache=cache), sampling)
        assert len(s.requests) == 2  # a truncated answer is never cached
    assert gen.text == ("DEFECT " * 30_000)[: CHARS_PER_TOKEN * 8]
    assert gen.finish_reason == again.finish_reason == "truncated"
    assert gen.info["truncated_from_chars"] == 210_000
    assert len(json.dumps({"text": gen.text, **gen.info})) < 1000  # what a trace would hold
    assert len(ResponseCache(cache)) == 0


def test_tool_call_arguments_count_against_the_same_cap():
    body = completion(None, "tool_calls")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "a", "type": "function", "function": {"name": "say", "arguments": "x" * 100_000}},
        {"id": "b", "type": "function", "function": {"name": "wait", "arguments": {"n": 1}}},
    ]
    with FaultServer([("body", body)]) as s:
        gen = one(backend(s), Sampling(max_new_tokens=4))
    calls = gen.info["tool_calls"]
    assert sum(len(c["name"] or "") + len(c["arguments"]) for c in calls) == 4 * CHARS_PER_TOKEN
    assert gen.finish_reason == "truncated" and calls[0]["name"] == "say"


_CHILD = """
import json, resource, sys
from stratagem.backends.base import Sampling
from stratagem.backends.openai import OpenAIBackend

url, cache = sys.argv[1], sys.argv[2]
b = OpenAIBackend("fake", url, concurrency=8, max_retries=0, cache=cache)
chats = [[{"role": "user", "content": f"move {i}"}] for i in range(16)]
gens = b.generate(chats, Sampling(max_new_tokens=64), seeds=list(range(16)))
b.close()
print(json.dumps({
    "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "gens": [[g.finish_reason, g.text, g.info] for g in gens],
}))
"""


def _run_child(server, tmp_path, name):
    cache = tmp_path / name / "c.sqlite"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, server.url, str(cache)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    out["cache_bytes"] = sum(f.stat().st_size for f in cache.parent.iterdir())
    return out


def test_hostile_bodies_keep_peak_memory_traces_and_cache_small(tmp_path):
    hostile = [
        ("huge", 50_000_000, False),  # 50 MB, no Content-Length: refused while streaming in
        ("huge", 50_000_000, True),  # 50 MB announced: refused before it is read
        ("huge", 5_000_000, True),  # a 5 MB completion ignoring max_tokens=64
        ("ok", "COOPERATE " * 20_000),  # 200 KB: within the body limit, the text is truncated
    ]
    with FaultServer([("ok", "COOPERATE")]) as s:
        normal = _run_child(s, tmp_path, "normal")
    with FaultServer(handler=lambda request, i: hostile[i % len(hostile)]) as s:
        attacked = _run_child(s, tmp_path, "hostile")
    assert attacked["rss_kb"] <= 1.5 * normal["rss_kb"], (attacked["rss_kb"], normal["rss_kb"])
    for finish, text, info in attacked["gens"]:
        assert finish in ("error", "truncated") and len(text) <= CHARS_PER_TOKEN * 64
        assert len(json.dumps([text, info])) < 2000
    assert {f for f, *_ in attacked["gens"]} == {"error", "truncated"}
    assert attacked["cache_bytes"] <= normal["cache_bytes"] < 200_000


@pytest.mark.parametrize("value", ["-5", "nan", "NaN", "inf", "-inf", "1e999", "soon", "", "0x10"])
def test_unusable_retry_after_values_fall_back_to_the_backoff(value):
    with FaultServer([("status", 429, {"retry-after": value}), ("ok", "DEFECT")]) as s:
        start = time.monotonic()
        gen = one(backend(s))
        # the 0.01 s backoff, not a wait read from the header (0x10 would be 16 s, an honoured
        # infinity the 60 s cap): 10 s leaves room for a loaded machine (2.5 s seen under load)
        assert time.monotonic() - start < 10
    assert gen.text == "DEFECT" and gen.info["retries"] == [429]


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
def test_huge_retry_after_values_are_capped(header):
    response = SimpleNamespace(headers={header: "1e12"})
    b = OpenAIBackend("fake", "http://127.0.0.1:9/v1")
    assert b._backoff(0, retry_after(response)) == MAX_RETRY_AFTER_SECONDS
    # and a wait past the retry budget ends the request at once instead of sleeping through it
    with FaultServer([("status", 503, {header: "1e12"}), ("ok", "DEFECT")]) as s:
        start = time.monotonic()
        gen = one(backend(s, retry_timeout=5))
        assert time.monotonic() - start < 2
    assert gen.finish_reason == "error" and len(s.requests) == 1


def test_retry_after_as_an_http_date():
    past = SimpleNamespace(headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert retry_after(past) is None  # already passed: the backoff decides
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    seconds = retry_after(SimpleNamespace(headers={"retry-after": future}))
    assert seconds is not None and 25 < seconds <= 30
    assert retry_after(SimpleNamespace(headers={"retry-after": "Wed, 99 Foo"})) is None
    assert not math.isnan(retry_after(SimpleNamespace(headers={"retry-after": "2"})))


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "",
        "127.0.0.1:8000/v1",
        "localhost:8000",
        "ftp://127.0.0.1/v1",
        "file:///tmp/x",
        "http://",
        "http:///v1",
        "http://127.0.0.1:port/v1",
        "http://[::1/v1",
        "http://x\n/v1",
    ],
)
def test_a_base_url_that_is_not_http_with_a_host_is_refused(url):
    with pytest.raises(ConfigError, match=r"--base-url http://127\.0\.0\.1:8000/v1") as err:
        OpenAIBackend("fake", url)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.example.com/v1/"])
def test_good_base_urls_are_accepted_without_a_connection(url):
    assert OpenAIBackend("fake", url).base_url == url.rstrip("/")


@pytest.mark.parametrize(
    "settings",
    [
        {"concurrency": 0},
        {"max_retries": -1},
        {"attempt_timeout": 0},
        {"attempt_timeout": float("nan")},
        {"max_response_bytes": 0},
    ],
)
def test_impossible_settings_are_config_errors(settings):
    with pytest.raises(ConfigError, match=next(iter(settings))):
        OpenAIBackend("fake", "http://127.0.0.1:8000/v1", **settings)


def test_every_call_failing_ends_each_decision_with_an_error():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    closed = OpenAIBackend("fake", f"http://127.0.0.1:{port}/v1", backoff_seconds=0.01)
    gens = closed.generate([CHAT] * 3, Sampling(), seeds=[1, 2, 3])
    assert all(g.finish_reason == "error" and "connection error" in g.info["error"] for g in gens)
    with FaultServer([("status", 500)]) as s:
        gens = backend(s, max_retries=1).generate([CHAT] * 3, Sampling(), seeds=[1, 2, 3])
    assert len(s.requests) == 6
    assert all(g.finish_reason == "error" and g.info["http_status"] == 500 for g in gens)
    assert all(g.info["error"] == "HTTP 500 after 2 attempts" for g in gens)


def test_stop_checks_are_accepted_and_ignored():
    with FaultServer([("ok", "I choose DEFECT and then explain why")]) as s:
        gen = one(backend(s), stop=[lambda text: "DEFECT" in text])
    assert gen.text == "I choose DEFECT and then explain why" and gen.finish_reason == "stop"


def test_absurd_json_is_retried_and_garbage_fields_are_ignored():
    with FaultServer([("raw", b"[" * 200_000)]) as s:  # deeper than json can recurse
        gen = one(backend(s, max_retries=1))
    assert gen.finish_reason == "error" and len(s.requests) == 2
    body = completion("DEFECT", system_fingerprint="f" * 100_000)
    body["usage"] = {"completion_tokens": "many", "prompt_tokens": -3}
    body["choices"][0]["finish_reason"] = {"not": "a string"}
    with FaultServer([("body", body)]) as s:
        gen = one(backend(s))
    assert gen.text == "DEFECT" and gen.tokens == 1 and gen.prompt_tokens == 0
    assert len(gen.info["system_fingerprint"]) <= 201 and gen.info["api_finish_reason"] is None


def test_a_huge_cache_entry_from_before_the_cap_is_capped_on_the_way_out(tmp_path):
    import sqlite3

    path = tmp_path / "c.sqlite"
    with FaultServer([("ok", "DEFECT")]) as s:
        one(backend(s, cache=str(path)))
        db = sqlite3.connect(path)
        huge = json.dumps({"text": "DEFECT " * 100_000, "tokens": "x", "tool_calls": [7]})
        db.execute("UPDATE responses SET value = ?", (huge,))
        db.commit()
        db.close()
        hit = one(backend(s, cache=str(path)))
        assert len(s.requests) == 1
    assert hit.info["cached"] and len(hit.text) == CHARS_PER_TOKEN * Sampling().max_new_tokens
    assert hit.tokens == 0 and hit.info["tool_calls"] is None
    db = sqlite3.connect(path)
    db.execute("UPDATE responses SET value = ?", (json.dumps({"no": "text"}),))
    db.commit()
    db.close()
    with FaultServer([("ok", "COOPERATE")]) as s:
        assert one(backend(s, cache=str(path))).text == "COOPERATE"  # a miss, not a crash
