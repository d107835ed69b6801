"""OpenAI-compatible backend (vLLM, SGLang, llama.cpp server, hosted APIs) — SPEC §4.2,
RELIABILITY B and C.

- Retries exactly the retryable failures (408, 409, 429, 5xx, timeouts, connection errors, a 200
  whose body is not JSON) with exponential backoff and jitter, honouring ``Retry-After`` /
  ``retry-after-ms`` up to a cap (an unusable value — negative, NaN, garbage — counts as absent).
  The client's own retries are off, so ``max_retries`` is the whole budget; ``retry_timeout``
  bounds the total time of one request.
- 401/403 stop the run at once with a message naming the URL and the key's variable; other 4xx
  end that decision's episode as an error, never the whole run.
- Hostile servers are bounded where responses are read, for every call alike. The official
  async ``openai`` client runs on the backend's own event loop, so each attempt has one deadline
  for the whole response — connect, headers and body — and a server trickling a byte a second
  is cut at ``attempt_timeout`` (B3b; httpx's timeouts only bound the gap between two reads).
  The HTTP client handed to it refuses a body while it streams in once it passes
  ``max_response_bytes`` (8 MiB), or a tighter limit that grows with the ``max_tokens`` asked
  for (B5b).
- Completion text is capped at ``CHARS_PER_TOKEN`` characters per requested token before it is
  parsed, cached or traced (finish reason ``truncated``), so a server that ignores
  ``max_tokens`` cannot fill memory, the cache or the traces.
- Malformed successes (null content, empty choices, truncation) become recorded generations.
  At most ``concurrency`` requests are in flight.
- Ctrl-C / SIGTERM during a call (``interrupt``): attempts in flight are cancelled, queued ones
  dropped, backoff waits cut short, and no request is sent after it, whatever the endpoint does.
- Responses are cached (``cache.py``) keyed by everything that changes them, including the
  per-decision seed. API keys are read from the environment and never written anywhere.
- Action probabilities use the endpoint's logprobs when offered, else a constrained re-ask.

Its parts: the bounded HTTP client, URL checks and ``Retry-After`` in ``openai.http``; replies
and cache entries read into generations in ``openai.replies``.

Departure: the backend's ``stop`` checks are ignored — a non-streamed completion cannot be
stopped on a Python check, so callers parse the whole (capped) answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from stratagem.backends.base import Chat, Generation, Sampling, StopCheck
from stratagem.backends.cache import ResponseCache, cache_key
from stratagem.backends.openai.http import (
    MAX_RESPONSE_BYTES,
    Failed,
    ResponseRefused,
    Retryable,
    bounded_http_client,
    check_base_url,
    check_settings,
    httpx_for,
    retry_after,
    serve_loop,
    stop_loop,
)
from stratagem.backends.openai.replies import (
    CHARS_PER_TOKEN,
    generation_from_body,
    generation_from_cache,
    logprob_distribution,
    short,
)
from stratagem.errors import ConfigError, StratagemError
from stratagem.parsing import parse_action

RETRYABLE_STATUS = {408, 409, 429}
FATAL_STATUS = {401, 403}
MAX_RETRY_AFTER_SECONDS = 60.0


class BackendFatalError(StratagemError):
    """Every call would fail the same way (bad key, no access): stop the run."""


class OpenAIBackend:
    """A chat model behind an OpenAI-compatible endpoint, called through the official client.

    Args:
        model: the endpoint's model name.
        base_url: an ``http://`` or ``https://`` URL with a host (else a ``ConfigError``).
        api_key_env: the environment variable holding the key (the key is never stored).
        concurrency: most requests in flight at once.
        max_retries: retries after the first attempt; the whole budget.
        attempt_timeout: seconds one attempt may take, whole response included.
        retry_timeout: seconds one request may take, every attempt and wait included.
        max_response_bytes: response bodies above this are refused as they stream in (those to
            a request with ``max_tokens`` sooner: see ``response_byte_limit``).
        cache: a ``ResponseCache`` or a path to one; ``None`` for no cache.
        logprobs: ask for logprobs in ``choice_probs`` before falling back to a re-ask.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 5,
        attempt_timeout: float = 60.0,
        retry_timeout: float = 600.0,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 30.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        cache: ResponseCache | str | None = None,
        logprobs: bool = True,
    ):
        import openai

        check_base_url(base_url, httpx_for(openai))
        check_settings(concurrency, max_retries, attempt_timeout, max_response_bytes)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.model_id = f"{model}@{self.base_url}"
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.attempt_timeout = attempt_timeout
        self.retry_timeout = retry_timeout
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.logprobs = logprobs
        self.cache = ResponseCache(cache) if isinstance(cache, str | os.PathLike) else cache
        # The client lives on its own event loop so that a deadline can cancel an attempt
        # wherever it waits; the workers below block on it, one attempt each.
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=serve_loop, args=(self._loop,), daemon=True).start()
        weakref.finalize(self, stop_loop, self._loop)
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            max_retries=0,  # our loop is the whole retry budget
            timeout=attempt_timeout,
            http_client=bounded_http_client(max_response_bytes),
        )
        self._openai = openai
        self._pool = ThreadPoolExecutor(max_workers=concurrency)
        self._jitter = random.Random(0)
        self._lock = threading.Lock()
        self._closed = self._stopped = False
        self._stop = threading.Event()  # set on interrupt: wakes backoff waits
        self.requests = 0  # HTTP attempts made (for tests and the run manifest)
        self.supports_tools = True  # native JSON tool calls (passed as ``tools=``)

    @classmethod
    def from_options(cls, model: str, options: Any) -> OpenAIBackend:
        """Build from the CLI's agent options (``--base-url``, ``--api-key-env``, ...), with the
        shared response cache."""
        from stratagem.backends.embedded import cache_root

        if not options.base_url:
            raise ConfigError("openai:MODEL needs --base-url (an OpenAI-compatible endpoint)")
        return cls(
            model,
            options.base_url,
            api_key_env=options.api_key_env,
            concurrency=options.concurrency,
            max_retries=options.max_retries,
            attempt_timeout=options.attempt_timeout,
            cache=str(cache_root() / "responses.sqlite"),
        )

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
        tools: list | None = None,
    ) -> list[Generation]:
        """One generation per chat, in order. A call that fails after its retries is a
        generation with ``finish_reason="error"`` and ``info["error"]``; only a refused key
        (``BackendFatalError``) raises.

        ``stop`` is accepted for the backend contract and ignored: the endpoint returns whole
        completions (no streaming), so it cannot stop on a Python check mid-answer. Answers are
        still bounded by ``max_new_tokens`` and, should the server ignore that, by the
        ``CHARS_PER_TOKEN`` cap. ``tools`` are JSON tool schemas passed on to the endpoint; its
        native calls come back in ``info["tool_calls"]``.
        """
        row_seeds: list[int | None] = list(seeds) if seeds is not None else [None] * len(chats)
        jobs = [
            self._pool.submit(self._complete, chat, sampling, seed, tools)
            for chat, seed in zip(chats, row_seeds, strict=True)
        ]
        return self._gather(jobs)

    def _gather(self, jobs: list[Future[Any]]) -> list[Any]:
        try:  # an interruption while waiting stops the backend: nothing is sent after it
            return [job.result() for job in jobs]
        except (KeyboardInterrupt, SystemExit):
            with contextlib.suppress(Exception):  # the interruption is what propagates
                self.interrupt()
            raise

    def _params(self, sampling: Sampling, seed: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
        }
        if seed is not None:
            params["seed"] = seed % (2**31)
        return params

    def _complete(
        self, chat: Chat, sampling: Sampling, seed: int | None, tools: list | None = None
    ) -> Generation:
        messages = [dict(m) for m in chat]
        params = self._params(sampling, seed)
        if tools:
            params["tools"] = tools
        key = cache_key(
            kind="openai",
            model=self.model,
            base_url=self.base_url,
            messages=messages,
            params=params,
        )
        max_chars = CHARS_PER_TOKEN * sampling.max_new_tokens
        if self.cache is not None and (
            hit := generation_from_cache(self.cache.get(key), max_chars)
        ):
            return hit
        start = time.perf_counter()
        try:
            body, retries = self._request(messages=messages, **params)
        except Failed as exc:
            return Generation(
                text="",
                finish_reason="error",
                seconds=time.perf_counter() - start,
                info={"error": str(exc), "http_status": exc.status},
            )
        seconds = time.perf_counter() - start
        gen = generation_from_body(body, seconds, retries, max_chars)
        complete = gen.finish_reason in ("stop", "action") and (
            gen.text != "" or bool(gen.info.get("tool_calls"))
        )
        if self.cache is not None and complete:
            self.cache.put(
                key,
                {
                    "text": gen.text,
                    "tokens": gen.tokens,
                    "prompt_tokens": gen.prompt_tokens,
                    "finish_reason": gen.finish_reason,
                    "seconds": seconds,
                    "fingerprint": gen.info.get("system_fingerprint"),
                    "tool_calls": gen.info.get("tool_calls"),
                },
            )
        return gen

    def _request(self, **kwargs: Any) -> tuple[dict[str, Any], list[Any]]:
        """POST one chat completion; returns the JSON body and the retries it took."""
        deadline = time.monotonic() + self.retry_timeout
        retries: list[Any] = []
        for attempt in range(self.max_retries + 1):
            try:
                seconds = min(self.attempt_timeout, deadline - time.monotonic())
                return self._attempt(seconds, **kwargs), retries
            except Retryable as exc:
                retries.append(exc.status or str(exc))
                last = exc
                if attempt == self.max_retries:
                    break
                wait = self._backoff(attempt, exc.retry_after)
                if time.monotonic() + wait > deadline:
                    break
                self._stop.wait(wait)
        reason = "timeout" if "timed out" in str(last).lower() else str(last)
        raise Failed(f"{reason} after {len(retries)} attempts", last.status)

    def _attempt(self, seconds: float, **kwargs: Any) -> dict[str, Any]:
        """One HTTP attempt, the whole response read within ``seconds``; its JSON body."""
        openai = self._openai
        with self._lock:  # checked and sent under the lock ``interrupt`` takes: none after it
            if self._stopped:
                raise Failed("interrupted")
            self.requests += 1
            post = self._post(seconds, kwargs) if seconds > 0 else None
            pending = asyncio.run_coroutine_threadsafe(post, self._loop) if post else None
        try:
            if pending is None:
                raise TimeoutError
            text = pending.result().text
            del pending  # the body's bytes go before its text is parsed: less memory at peak
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise Retryable("request timed out") from exc
        except openai.APIConnectionError as exc:
            raise Retryable(f"connection error: {exc}") from exc
        except ResponseRefused as exc:
            raise Failed(str(exc), exc.status) from exc
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in FATAL_STATUS:
                raise BackendFatalError(
                    f"{self.base_url} refused the request with HTTP {status}; check the API key "
                    f"in ${self.api_key_env}"
                ) from None
            if status in RETRYABLE_STATUS or status >= 500:
                raise Retryable(f"HTTP {status}", status, retry_after(exc.response)) from exc
            raise Failed(f"HTTP {status}: {short(exc.message)}", status) from exc
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly nested JSON
            raise Retryable("200 with a body that is not JSON") from exc
        if not isinstance(body, dict):
            raise Retryable("200 with a JSON body that is not an object")
        return body

    async def _post(self, seconds: float, kwargs: dict[str, Any]) -> Any:
        """The HTTP response to one POST, read whole (and capped) within ``seconds``."""
        if self._stopped:  # interrupted before this attempt reached the loop
            raise asyncio.CancelledError
        async with asyncio.timeout(seconds):
            raw = await self._client.chat.completions.with_raw_response.create(
                model=self.model, **kwargs
            )
            return raw.http_response

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_SECONDS)
        with self._lock:
            jitter = self._jitter.uniform(0.5, 1.0)
        return min(self.backoff_seconds * 2**attempt, self.max_backoff_seconds) * jitter

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """For each chat, a distribution over its choices: the endpoint's first-token logprobs
        when offered, else a one-hot from a constrained re-ask (uniform if that fails too)."""
        jobs = [
            self._pool.submit(self._choice_probs, chat, cs)
            for chat, cs in zip(chats, choices, strict=True)
        ]
        return self._gather(jobs)

    def _choice_probs(self, chat: Chat, choices: tuple[str, ...]) -> dict[str, float]:
        messages = [dict(m) for m in chat]
        if self.logprobs:
            try:
                body, _ = self._request(
                    messages=messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=20
                )
                dist = logprob_distribution(body, choices)
                if dist is not None:
                    return dist
            except Failed:
                pass
        ask = [
            *messages,
            {"role": "user", "content": "Answer with exactly one of: " + ", ".join(choices)},
        ]
        gen = self._complete(ask, Sampling(temperature=0.0, max_new_tokens=16), None)
        token = parse_action(gen.text, choices).token
        if token is None:
            return {c: 1 / len(choices) for c in choices}
        return {c: float(c == token) for c in choices}

    def interrupt(self) -> None:
        """Stop at once (Ctrl-C, SIGTERM): no request is sent from now on, queued calls are
        dropped, attempts in flight cancelled, backoff waits cut short; then ``close``."""
        with self._lock:
            self._stopped = True
        self._stop.set()
        self.close()

    def close(self) -> None:
        """Cancel what is queued or in flight, close connections and the cache; idempotent.
        The backend is unusable after."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=5)
        finally:
            stop_loop(self._loop)
            if self.cache is not None:
                self.cache.close()

    async def _shutdown(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:  # in-flight attempts: their waiting workers get errors
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # done before the loop stops
        await self._client.close()
