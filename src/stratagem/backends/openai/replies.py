"""Reading an OpenAI-compatible endpoint's replies: bodies and cache entries to ``Generation``s.

Nothing a server sends is trusted: text is capped at ``CHARS_PER_TOKEN`` characters per requested
token (finish reason ``truncated``) before it is parsed, cached or traced; lone surrogates are
replaced; counts that are not non-negative integers are dropped; a malformed success (no choices,
null content) is a recorded ``empty`` generation, never an exception.
"""

from __future__ import annotations

import json
import math
from typing import Any

from stratagem.backends.base import FinishReason, Generation

CHARS_PER_TOKEN = 16  # completion text kept per requested token (a token is ~4 characters)


def generation_from_body(
    body: dict[str, Any], seconds: float, retries: list[Any], max_chars: int
) -> Generation:
    """The generation a chat-completion body describes. Its text (content and tool-call
    arguments together) is cut to ``max_chars``, with finish reason ``truncated``."""
    info: dict[str, Any] = {"system_fingerprint": short_or_none(body.get("system_fingerprint"))}
    if retries:
        info["retries"] = retries
    choices = body.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)):
        return Generation(
            "", finish_reason="empty", seconds=seconds, info={**info, "malformed": "no choices"}
        )
    message = choices[0].get("message")
    message = message if isinstance(message, dict) else {}
    finish = short_or_none(choices[0].get("finish_reason"))
    info["api_finish_reason"] = finish
    raw = message.get("content")
    content = clean(raw[:max_chars]) if isinstance(raw, str) else ""
    calls, call_chars = tool_calls(message, max_chars - len(content))
    received = (len(raw) if isinstance(raw, str) else 0) + call_chars
    if received > max_chars:
        info["truncated_from_chars"] = received
    if calls:
        info["tool_calls"] = calls
    elif not content:
        info["malformed"] = "null content" if raw is None else "empty content"
        return Generation("", finish_reason="empty", seconds=seconds, info=info)
    reason: FinishReason
    if received > max_chars:
        reason = "truncated"
    elif calls or finish in (None, "stop"):
        reason = "stop"
    else:
        reason = "length" if finish == "length" else "error"
    raw_usage = body.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    tokens = count(usage.get("completion_tokens"))
    return Generation(
        text=content,
        tokens=tokens if tokens is not None else len(content.split()),
        prompt_tokens=count(usage.get("prompt_tokens")) or 0,
        finish_reason=reason,
        seconds=seconds,
        info=info,
    )


def generation_from_cache(hit: dict[str, Any] | None, max_chars: int) -> Generation | None:
    """The generation a cache entry holds, its text capped like a fresh one's (entries written
    before the cap existed may be huge); ``None`` for a miss or an entry without text."""
    if hit is None or not isinstance(hit.get("text"), str):
        return None
    text = hit["text"][:max_chars]
    calls = hit.get("tool_calls") if isinstance(hit.get("tool_calls"), list) else None
    if calls is not None:
        wrapped = {"tool_calls": [{"function": c} for c in calls]}
        calls, _ = tool_calls(wrapped, max_chars - len(text))
    return Generation(
        text=text,
        tokens=count(hit.get("tokens")) or 0,
        prompt_tokens=count(hit.get("prompt_tokens")) or 0,
        finish_reason="action" if hit.get("finish_reason") == "action" else "stop",
        info={
            "cached": True,
            "tool_calls": calls,
            "system_fingerprint": short_or_none(hit.get("fingerprint")),
            "original_seconds": hit.get("seconds"),
        },
    )


def tool_calls(message: dict[str, Any], max_chars: int) -> tuple[list[dict[str, Any]] | None, int]:
    """``[{"name", "arguments"}]`` from a message's native tool calls (arguments as JSON text),
    names and arguments cut to ``max_chars`` in all; and how many characters the server sent."""
    raw_calls = message.get("tool_calls")
    calls, received, left = [], 0, max_chars
    for call in raw_calls if isinstance(raw_calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        raw_name = fn.get("name")
        name = raw_name if isinstance(raw_name, str) else ""
        arguments = fn.get("arguments", "{}")
        if not isinstance(arguments, str):  # some servers send an object
            try:
                arguments = json.dumps(arguments)
            except (TypeError, ValueError, RecursionError):
                arguments = ""
        received += len(name) + len(arguments)
        if left > 0:
            name = clean(name[:left])
            arguments = clean(arguments[: left - len(name)])
            left -= len(name) + len(arguments)
            calls.append({"name": name or None, "arguments": arguments})
    return calls or None, received


def logprob_distribution(body: dict[str, Any], choices: tuple[str, ...]) -> dict[str, float] | None:
    """Mass of the top first tokens that begin each choice (and only it), renormalised."""
    try:
        top = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    mass = dict.fromkeys(choices, 0.0)
    for entry in top if isinstance(top, list) else []:
        if not isinstance(entry, dict):
            continue
        piece = str(entry.get("token", ""))[:200].strip().upper()
        try:
            logprob = float(entry.get("logprob", -math.inf))
        except (TypeError, ValueError):
            continue
        matches = [c for c in choices if piece and c.upper().startswith(piece)]
        if len(matches) == 1 and logprob <= 0:  # a positive or NaN logprob is no probability
            mass[matches[0]] += math.exp(logprob)
    total = sum(mass.values())
    return {c: m / total for c, m in mass.items()} if total > 0 else None


def count(value: Any) -> int | None:
    """A token count from a usage field, or ``None`` when it is not a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def clean(text: str) -> str:
    r"""The text with lone surrogates (JSON allows ``"\ud800"``) replaced: valid UTF-8."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def short_or_none(value: Any) -> str | None:
    """``value`` cleaned and shortened when it is a string, else ``None``."""
    return short(clean(value)) if isinstance(value, str) else None


def short(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit] + "…"
