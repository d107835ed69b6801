"""OpenAI-compatible backend (vLLM, SGLang, llama.cpp server, hosted APIs) — SPEC §4.2,
RELIABILITY B and C.

- Retries exactly the retryable failures (408, 409, 429, 5xx, timeouts, connection errors, a 200
  whose body is not JSON) with exponential backoff and jitter, honouring ``Retry-After`` /
  ``retry-after-ms`` up to a cap. The client's own retries are off, so ``max_retries`` is the
  whole budget; ``retry_timeout`` bounds the total time of one request.
- 401/403 stop the run at once with a message naming the URL and the key's variable; other 4xx
  end that decision's episode as an error, never the whole run.
- Malformed successes (null content, empty choices, truncation) become recorded generations.
- At most ``concurrency`` requests are in flight; each request has a per-attempt timeout.
- Responses are cached (``cache.py``) keyed by everything that changes them, including the
  per-decision seed. API keys are read from the environment and never written anywhere.
- Action probabilities use the endpoint's logprobs when offered, else a constrained re-ask.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stratagem.agents.parsing import parse_action
from stratagem.backends.base import Chat, Generation, Sampling
from stratagem.backends.cache import ResponseCache, cache_key
from stratagem.errors import StratagemError

RETRYABLE_STATUS = {408, 409, 429}
FATAL_STATUS = {401, 403}
MAX_RETRY_AFTER_SECONDS = 60.0


class BackendFatalError(StratagemError):
    """Every call would fail the same way (bad key, no access): stop the run."""


class _Retryable(Exception):
    def __init__(self, reason: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(reason)
        self.status, self.retry_after = status, retry_after


class _Failed(Exception):
    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.status = status


class OpenAIBackend:
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
        cache: ResponseCache | str | None = None,
        logprobs: bool = True,
    ):
        import openai

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.model_id = f"{model}@{self.base_url}"
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.retry_timeout = retry_timeout
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.logprobs = logprobs
        self.cache = ResponseCache(cache) if isinstance(cache, str | os.PathLike) else cache
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            max_retries=0,  # our loop is the whole retry budget
            timeout=attempt_timeout,  # per attempt: connect and read
        )
        self._openai = openai
        self._pool = ThreadPoolExecutor(max_workers=concurrency)
        self._jitter = random.Random(0)
        self._jitter_lock = threading.Lock()
        self.requests = 0  # HTTP attempts made (for tests and the run manifest)
        self.supports_tools = True  # native JSON tool calls (passed as ``tools=``)

    @classmethod
    def from_options(cls, model: str, options: Any) -> OpenAIBackend:
        from stratagem.backends.embedded import cache_root

        if not options.base_url:
            raise StratagemError("openai:MODEL needs --base-url (an OpenAI-compatible endpoint)")
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
        legal=None,
        seeds=None,
        done=None,
        tools=None,
    ):
        seeds = list(seeds) if seeds is not None else [None] * len(chats)
        jobs = [
            self._pool.submit(self._complete, chat, sampling, seed, tools)
            for chat, seed in zip(chats, seeds, strict=True)
        ]
        return [job.result() for job in jobs]

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
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return Generation(
                text=hit["text"],
                tokens=hit.get("tokens", 0),
                prompt_tokens=hit.get("prompt_tokens", 0),
                finish_reason=hit.get("finish_reason", "stop"),
                info={
                    "cached": True,
                    "tool_calls": hit.get("tool_calls"),
                    "system_fingerprint": hit.get("fingerprint"),
                    "original_seconds": hit.get("seconds"),
                },
            )
        start = time.perf_counter()
        try:
            body, retries = self._request(messages=messages, **params)
        except _Failed as exc:
            return Generation(
                text="",
                finish_reason="error",
                seconds=time.perf_counter() - start,
                info={"error": str(exc), "http_status": exc.status},
            )
        seconds = time.perf_counter() - start
        gen = _generation(body, seconds, retries)
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
                return self._attempt(**kwargs), retries
            except _Retryable as exc:
                retries.append(exc.status or str(exc))
                last = exc
                if attempt == self.max_retries:
                    break
                wait = self._backoff(attempt, exc.retry_after)
                if time.monotonic() + wait > deadline:
                    break
                time.sleep(wait)
        reason = "timeout" if "timed out" in str(last).lower() else str(last)
        raise _Failed(f"{reason} after {len(retries)} attempts", last.status)

    def _attempt(self, **kwargs: Any) -> dict[str, Any]:
        openai = self._openai
        self.requests += 1
        try:
            raw = self._client.chat.completions.with_raw_response.create(model=self.model, **kwargs)
            text = raw.http_response.text
        except openai.APITimeoutError as exc:
            raise _Retryable("request timed out") from exc
        except openai.APIConnectionError as exc:
            raise _Retryable(f"connection error: {exc}") from exc
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in FATAL_STATUS:
                raise BackendFatalError(
                    f"{self.base_url} refused the request with HTTP {status}; check the API key "
                    f"in ${self.api_key_env}"
                ) from None
            if status in RETRYABLE_STATUS or status >= 500:
                raise _Retryable(f"HTTP {status}", status, _retry_after(exc.response)) from exc
            raise _Failed(f"HTTP {status}: {_short(exc.message)}", status) from exc
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise _Retryable("200 with a body that is not JSON") from exc
        if not isinstance(body, dict):
            raise _Retryable("200 with a JSON body that is not an object")
        return body

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_SECONDS)
        with self._jitter_lock:
            jitter = self._jitter.uniform(0.5, 1.0)
        return min(self.backoff_seconds * 2**attempt, self.max_backoff_seconds) * jitter

    def choice_probs(self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]):
        jobs = [
            self._pool.submit(self._choice_probs, chat, cs)
            for chat, cs in zip(chats, choices, strict=True)
        ]
        return [job.result() for job in jobs]

    def _choice_probs(self, chat: Chat, choices: tuple[str, ...]) -> dict[str, float]:
        messages = [dict(m) for m in chat]
        if self.logprobs:
            try:
                body, _ = self._request(
                    messages=messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=20
                )
                dist = _logprob_distribution(body, choices)
                if dist is not None:
                    return dist
            except _Failed:
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

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.cache is not None:
            self.cache.close()


def _generation(body: dict[str, Any], seconds: float, retries: list[Any]) -> Generation:
    info: dict[str, Any] = {"system_fingerprint": body.get("system_fingerprint")}
    if retries:
        info["retries"] = retries
    usage = body.get("usage") or {}
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Generation(
            "", finish_reason="empty", seconds=seconds, info={**info, "malformed": "no choices"}
        )
    choice = choices[0]
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    finish = choice.get("finish_reason")
    calls = _tool_calls(message)
    if calls:
        info["tool_calls"] = calls
        return Generation(
            content if isinstance(content, str) else "",
            finish_reason="stop",
            seconds=seconds,
            info={**info, "api_finish_reason": finish},
        )
    if not isinstance(content, str) or not content:
        reason = "null content" if content is None else "empty content"
        return Generation(
            "",
            finish_reason="empty",
            seconds=seconds,
            info={**info, "malformed": reason, "api_finish_reason": finish},
        )
    content = content.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return Generation(
        text=content,
        tokens=int(tokens) if isinstance(tokens, int) else len(content.split()),
        prompt_tokens=int(usage.get("prompt_tokens", 0) or 0) if isinstance(usage, dict) else 0,
        finish_reason="length"
        if finish == "length"
        else "stop"
        if finish in (None, "stop")
        else "error",
        seconds=seconds,
        info={**info, "api_finish_reason": finish},
    )


def _tool_calls(message: Any) -> list[dict[str, Any]] | None:
    """``[{"name", "arguments"}]`` from a message's native tool calls (arguments left as text)."""
    if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
        return None
    calls = []
    for call in message["tool_calls"]:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            calls.append({"name": fn.get("name"), "arguments": fn.get("arguments", "{}")})
    return calls or None


def _logprob_distribution(
    body: dict[str, Any], choices: tuple[str, ...]
) -> dict[str, float] | None:
    """Mass of the top first tokens that begin each choice (and only it), renormalised."""
    import math

    try:
        top = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    mass = dict.fromkeys(choices, 0.0)
    for entry in top:
        piece = str(entry.get("token", "")).strip().upper()
        if not piece:
            continue
        matches = [c for c in choices if c.upper().startswith(piece)]
        if len(matches) == 1:
            mass[matches[0]] += math.exp(float(entry.get("logprob", -math.inf)))
    total = sum(mass.values())
    return {c: m / total for c, m in mass.items()} if total > 0 else None


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        return None
    return None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
