"""An LLM agent: the seat's chat + backend + parser + constrained fallback (SPEC §4).

One ``act`` call splits its batch by observation kind and makes one batched ``generate`` per kind:
fixed-choice turns (a legal vocabulary; each sequence stops once its last line holds an action)
and free-form turns (the game parses the text; it stops early only where the game can tell an
answer is complete). Fixed-choice answers that do not parse get one batched constrained pass.
Every decision records its status: ``ok`` (parsed), ``fallback`` (chosen by the constrained
decode), ``failed`` (no fallback possible; a seeded uniformly random legal action is played so the
episode goes on; for free-form turns an ``Invalid`` the game answers with a correction).
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Sequence
from typing import Any, Literal

from stratagem.agent import Decision, Status
from stratagem.backends.base import (
    Backend,
    Chat,
    Generation,
    Message,
    Sampling,
    ToolCallingBackend,
)
from stratagem.game import ChecksCompletion, Game, HasTools, Invalid, Observation, chat_for
from stratagem.parsing import holds_action, parse_action
from stratagem.seeding import derive

__all__ = ["LLMAgent", "chat_for"]

Fallback = Literal["argmax", "sample", "none"]  # how an unparsed answer is settled
FINAL_ASK = "Now give only your final action, one of: {choices}."


class LLMAgent:
    """A model playing a game: ``act`` is batched over every observation waiting for it."""

    def __init__(
        self,
        backend: Backend,
        game: Game,
        sampling: Sampling | None = None,
        *,
        fallback: Fallback = "argmax",
        name: str | None = None,
        stop_on_action: bool = True,
    ):
        """Args:
        backend: the model.
        game: the game whose answers this agent parses.
        sampling: generation settings (greedy by default).
        fallback: how the constrained decode picks when an answer does not parse.
        name: the agent's name in traces (default ``llm:<model id>``).
        stop_on_action: stop each sequence once its answer is complete (off only for
            benchmarks).
        """
        self.backend = backend
        self.game = game
        self.sampling = sampling or Sampling()
        self.fallback = fallback
        self.stop_on_action = stop_on_action
        self.name = name or f"llm:{backend.model_id}"

    def act(self, batch: Sequence[Observation]) -> list[Decision]:
        """Returns one decision per observation: one batched generation per observation kind."""
        out: dict[int, Decision] = {}
        fixed = [i for i, o in enumerate(batch) if o.legal]
        free = [i for i, o in enumerate(batch) if not o.legal]
        for idx, run in ((fixed, self._fixed_choice), (free, self._free_form)):
            if idx:
                for i, d in zip(idx, run([batch[i] for i in idx]), strict=True):
                    out[i] = d
        return [out[i] for i in range(len(batch))]

    def _stop(self, obs: Observation):
        if not self.stop_on_action:
            return None
        if obs.legal:
            return functools.partial(holds_action, legal=obs.legal)
        return self.game.complete if isinstance(self.game, ChecksCompletion) else None

    def _fixed_choice(self, batch: Sequence[Observation]) -> list[Decision]:
        start = time.perf_counter()
        chats = [chat_for(o) for o in batch]
        gens = self.backend.generate(
            chats, self.sampling, seeds=[o.seed for o in batch], stop=[self._stop(o) for o in batch]
        )
        tokens: list[str | None] = [
            parse_action(g.text, o.legal).token for g, o in zip(gens, batch, strict=True)
        ]
        statuses: list[Status] = ["ok" if t else "failed" for t in tokens]
        probs: list[dict[str, float] | None] = [None] * len(batch)
        missing = [
            i for i, t in enumerate(tokens) if t is None and gens[i].finish_reason != "error"
        ]
        if missing and self.fallback != "none":
            asks = [_fallback_chat(chats[i], gens[i], batch[i]) for i in missing]
            dists = self.backend.choice_probs(asks, [batch[i].legal for i in missing])
            for i, dist in zip(missing, dists, strict=True):
                # the draw depends on the sampled text too, so rollouts that share an episode
                # seed (GRPO groups) still differ when their answers differ
                tokens[i] = _pick(dist, derive(batch[i].seed, gens[i].text), self.fallback)
                statuses[i] = "fallback"
                probs[i] = dist
        seconds = (time.perf_counter() - start) / len(batch)
        decisions = []
        for i, (obs, gen) in enumerate(zip(batch, gens, strict=True)):
            token = tokens[i] or random.Random(obs.seed).choice(obs.legal)
            decisions.append(
                Decision(
                    action=self.game.parse(token, obs.legal),
                    text=gen.text,
                    status=statuses[i],
                    probs=probs[i],
                    tokens=gen.tokens,
                    seconds=seconds,
                    info=_info(gen),
                    error=gen.info.get("error") if gen.finish_reason == "error" else None,
                )
            )
        return decisions

    def _free_form(self, batch: Sequence[Observation]) -> list[Decision]:
        """Free-form turns (tool calls, messages): the game parses; a refusal is an ``Invalid``
        the game answers with a correction."""
        start = time.perf_counter()
        extra: dict[str, Any] = {}
        game = self.game
        if (
            isinstance(game, HasTools)
            and isinstance(self.backend, ToolCallingBackend)
            and self.backend.supports_tools
        ):
            extra["tools"] = game.tool_schemas()  # native tool calls where offered
        gens = self.backend.generate(
            [chat_for(o) for o in batch],
            self.sampling,
            seeds=[o.seed for o in batch],
            stop=[self._stop(o) for o in batch],
            **extra,
        )
        seconds = (time.perf_counter() - start) / len(batch)
        out = []
        for obs, gen in zip(batch, gens, strict=True):
            native = gen.info.get("tool_calls")
            if native and isinstance(self.game, HasTools):
                action = self.game.parse_tool_calls(native, gen.text)
            else:
                action = self.game.parse(gen.text, obs.legal)
            if action is None:
                action = Invalid("no action found")
            out.append(
                Decision(
                    action=action,
                    text=gen.text,
                    status="failed" if isinstance(action, Invalid) else "ok",
                    tokens=gen.tokens,
                    seconds=seconds,
                    info=_info(gen),
                    error=gen.info.get("error") if gen.finish_reason == "error" else None,
                )
            )
        return out

    def action_probs(self, batch: Sequence[Observation]) -> list[dict[str, float]]:
        """Returns, per observation, the distribution over legal actions with which this agent
        plays there when it answers with the action at once (SPEC §4.3).

        The chat is exactly the one play shows (``chat_for``: no extra line). The backend's
        constrained distribution (every continuation but the legal actions masked out) is
        tempered by the agent's sampling temperature: greedy agents (temperature 0) play the most
        likely action (ties split evenly), others ``p ** (1 / T)``, renormalised. ``top_p`` is
        not modelled: it truncates the whole vocabulary, not the legal actions.
        """
        dists = self.backend.choice_probs([chat_for(o) for o in batch], [o.legal for o in batch])
        return [tempered(d, self.sampling.temperature) for d in dists]


def tempered(dist: dict[str, float], temperature: float) -> dict[str, float]:
    """Returns ``dist`` at ``temperature``: the argmax (ties split) at 0, else ``p ** (1/T)``
    renormalised."""
    if temperature <= 0:
        best = max(dist.values())
        argmax = [a for a, p in dist.items() if p == best]
        return {a: (1 / len(argmax) if a in argmax else 0.0) for a in dist}
    if temperature == 1:
        return dict(dist)
    top = max(dist.values())
    # in log space relative to the top action, so a small temperature cannot underflow to 0 / 0
    powered = {
        a: math.exp((math.log(p) - math.log(top)) / temperature) if p > 0 else 0.0
        for a, p in dist.items()
    }
    total = sum(powered.values())
    return {a: p / total for a, p in powered.items()}


def _fallback_chat(chat: Chat, gen: Generation, obs: Observation) -> list[Message]:
    return [
        *chat,
        {"role": "assistant", "content": gen.text},
        {"role": "user", "content": FINAL_ASK.format(choices=", ".join(obs.legal))},
    ]


def _pick(dist: dict[str, float], seed: int, mode: Fallback) -> str:
    if mode == "sample":
        rng = random.Random(seed)
        return rng.choices(list(dist), weights=list(dist.values()))[0]
    return max(dist, key=dist.__getitem__)


def _info(gen: Generation) -> dict[str, Any] | None:
    info = {"prompt_tokens": gen.prompt_tokens, "finish_reason": gen.finish_reason}
    if gen.prefill_tokens:
        info["prefill_tokens"] = gen.prefill_tokens
    info.update(gen.info)
    return info
