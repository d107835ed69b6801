"""An LLM agent: game prompt + backend + parser + constrained fallback (SPEC §4).

One ``act`` call is one batched ``generate`` for every pending decision, then one batched
constrained pass for the answers that did not parse. Every decision records its status:
``ok`` (parsed), ``fallback`` (chosen by the constrained decode), ``failed`` (no fallback
possible; a seeded uniformly random legal action is played so the episode goes on).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any, Literal

from stratagem.agent import Decision
from stratagem.agents.parsing import parse_action
from stratagem.backends.base import Backend, Chat, Generation, Sampling
from stratagem.game import Game, Invalid, Observation
from stratagem.seeding import derive

FINAL_ASK = "Now give only your final action, one of: {choices}."
DIRECT_ASK = "Reply with your action only."


def chat_for(obs: Observation) -> list[dict[str, str]]:
    return [{"role": "system", "content": obs.rules}, {"role": "user", "content": obs.prompt}]


class LLMAgent:
    def __init__(
        self,
        backend: Backend,
        game: Game,
        sampling: Sampling | None = None,
        *,
        fallback: Literal["argmax", "sample", "none"] = "argmax",
        name: str | None = None,
        stop_on_action: bool = True,
    ):
        self.backend = backend
        self.game = game
        self.sampling = sampling or Sampling()
        self.fallback = fallback
        self.stop_on_action = stop_on_action  # SPEC §4.1 stopping; off only for benchmarks
        self.name = name or f"llm:{backend.model_id}"

    def act(self, batch: Sequence[Observation]) -> list[Decision]:
        if not batch:
            return []
        start = time.perf_counter()
        chats = [chat_for(o) for o in batch]
        free_form = not any(o.legal for o in batch)
        legal = [o.legal for o in batch] if self.stop_on_action and not free_form else None
        done = [self._complete] * len(batch) if free_form and self.stop_on_action else None
        extra = {}
        if (
            free_form
            and getattr(self.backend, "supports_tools", False)
            and hasattr(self.game, "tool_schemas")
        ):
            extra["tools"] = self.game.tool_schemas()  # native tool calls where offered
        gens = self.backend.generate(
            chats, self.sampling, legal=legal, seeds=[o.seed for o in batch], done=done, **extra
        )
        if free_form:
            return self._free_form(batch, gens, start)
        tokens: list[str | None] = [
            parse_action(g.text, o.legal).token for g, o in zip(gens, batch, strict=True)
        ]
        statuses = ["ok" if t else "failed" for t in tokens]
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
                    status=statuses[i],  # type: ignore[arg-type]
                    probs=probs[i],
                    tokens=gen.tokens,
                    seconds=seconds,
                    info=_info(gen),
                    error=gen.info.get("error") if gen.finish_reason == "error" else None,
                )
            )
        return decisions

    def _complete(self, text: str) -> bool:
        """A free-form answer is complete once the game accepts it."""
        action = self.game.parse(text, ())
        return action is not None and not isinstance(action, Invalid)

    def _free_form(
        self, batch: Sequence[Observation], gens: list[Generation], start: float
    ) -> list[Decision]:
        """Free-form turns (tool calls): the game parses; a refusal is an ``Invalid`` the game
        answers with a correction."""
        seconds = (time.perf_counter() - start) / len(batch)
        out = []
        for obs, gen in zip(batch, gens, strict=True):
            native = gen.info.get("tool_calls")
            if native and hasattr(self.game, "parse_tool_calls"):
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
        """The constrained distribution over legal actions when asked to answer at once."""
        chats: list[Chat] = []
        for obs in batch:
            chat = chat_for(obs)
            chat[-1] = {"role": "user", "content": f"{obs.prompt}\n{DIRECT_ASK}"}
            chats.append(chat)
        return self.backend.choice_probs(chats, [o.legal for o in batch])


def _fallback_chat(chat: Chat, gen: Generation, obs: Observation) -> list[dict[str, str]]:
    return [
        *chat,
        {"role": "assistant", "content": gen.text},
        {"role": "user", "content": FINAL_ASK.format(choices=", ".join(obs.legal))},
    ]


def _pick(dist: dict[str, float], seed: int, mode: str) -> str:
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
