"""What the dialogue commands (``solve``, ``psro``, ``imitate`` on meeting, fruit, debate) set up
before a tree is expanded: the model (local, or sharded over Ray workers) behind the response
cache, the domain and its scenarios, the tree settings; and solving the expanded trees.

``settings`` below is any object with the dialogue options of the command line (agent,
instructions, seed, replies, seeds, temperature, top_p, max_new_tokens, judge_fallback, cache,
ray / ray_address / workers and the LLM backend options): the commands pass their config.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

from stratagem.agents.settings import AgentSettings
from stratagem.errors import ConfigError
from stratagem.settings import Positive, RaySettings, given_settings, opt


@dataclasses.dataclass(kw_only=True)
class DialogueSettings(AgentSettings, RaySettings):
    """LLM-expanded dialogue trees (meeting, fruit, debate; seed 003): the model that writes and
    judges, the instructions, the tree's size and the response cache."""

    instructions: list[str] | None = None
    """The instructions a seat chooses from [the domain's own set]."""
    replies: Positive = 2
    """Messages after the opening."""
    seeds: Positive = 2
    """LLM seeds per message (the chance outcomes of the tree)."""
    judge_fallback: bool = True
    """Read an unparseable judge answer by scoring the candidate verdicts."""
    cache: str | None = None
    """Response cache file (SQLite) [<stratagem cache>/dialogue.sqlite]."""
    seed: int = opt(0, "-s")
    """Scenario seed."""

    def refuse_dialogue_settings(self, extra: tuple[str, ...] = ()) -> None:
        """Refuses dialogue settings (and the command's ``extra`` ones) changed from their
        defaults, for a game that is not a dialogue game: they would be silently ignored."""
        from stratagem.solvers.games import dialogue_games

        names = [f.name for f in dataclasses.fields(DialogueSettings)] + list(extra)
        given = [n for n in names if n != "seed" and n in given_settings(self)]
        if given:
            flags = ", ".join("--" + n.replace("_", "-") for n in sorted(given))
            raise ConfigError(
                f"{flags}: dialogue settings; {getattr(self, 'game', 'this')} is not a dialogue "
                f"game (dialogue games: {', '.join(dialogue_games())})"
            )


# Dialogue trees sample: an LLM seed is a chance outcome, so greedy decoding would collapse them
TEMPERATURE, TOP_P, MESSAGE_TOKENS = 0.8, 0.95, 48


def sampling_of(settings: Any) -> Any:
    """Returns the ``Sampling`` of the tree's messages (unset values: 0.8, 0.95, 48 tokens)."""
    from stratagem.backends.base import Sampling

    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    return Sampling(
        pick(settings.temperature, TEMPERATURE),
        pick(settings.top_p, TOP_P),
        pick(settings.max_new_tokens, MESSAGE_TOKENS),
    )


def make_backend(settings: Any) -> Any:
    """The model ``settings.agent`` names, for writing and judging dialogue (no agent wrapper:
    the trees call the backend directly); with Ray, a ``RayBackend`` whose workers each hold
    one copy of it and answer a shard of every call."""
    from stratagem.agents.spec import LLMOptions, is_llm
    from stratagem.agents.spec import make_backend as backend_of

    if not is_llm(settings.agent):
        raise ConfigError(
            f"unknown agent {settings.agent!r}: use hf, hf:MODEL, openai:MODEL or vllm[:MODEL]"
        )
    options = LLMOptions(
        adapter=settings.adapter,
        dtype=settings.dtype,
        base_url=settings.base_url,
        api_key_env=settings.api_key_env,
        max_batch=settings.max_batch,
        concurrency=settings.concurrency,
        max_retries=settings.max_retries,
        attempt_timeout=settings.attempt_timeout,
    )
    if settings.ray_target() is None:
        return backend_of(settings.agent, options)
    from stratagem.backends.sharded import RayBackend

    factory = functools.partial(backend_of, settings.agent, options)
    return RayBackend(factory, **settings.ray_options())


def cached_backend(settings: Any) -> Any:
    """``make_backend`` behind the persistent response cache (``settings.cache``, default
    ``<stratagem cache>/dialogue.sqlite``)."""
    from stratagem.backends.cache import CachedBackend
    from stratagem.backends.embedded import cache_root

    path = Path(settings.cache) if settings.cache else cache_root() / "dialogue.sqlite"
    return CachedBackend(make_backend(settings), path)


def dialogue_setup(
    settings: Any, game: str, count: int, offset: int = 0, *, baseline: bool = True
) -> tuple:
    """Returns the domain, ``count`` scenarios (the i-th seeded by ``derive(seed, game, i)``,
    from ``offset``) and the tree settings (keyword arguments of ``DialogueTree``).

    Everything the run depends on is checked here, before any model is loaded or called: the
    instructions (known to the domain, distinct, and, with ``baseline``, at least two including
    ``any``, the unsteered LLM that CFR Gain, NashConv and the steered meta-game compare
    against) and the counts. Raises ``ConfigError`` (one line) otherwise.
    """
    from stratagem.games.dialogue import ANY, get_domain
    from stratagem.seeding import derive

    domain = get_domain(game, settings.instructions)
    if baseline and (ANY not in domain.instructions or len(domain.instructions) < 2):
        raise ConfigError(
            f"--instructions {','.join(domain.instructions)}: needs {ANY!r} (the unsteered "
            f"baseline every metric compares against) and at least one other instruction"
        )
    for name in ("replies", "seeds"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"--{name} must be at least 1, not {getattr(settings, name)}")
    if count < 1:
        raise ConfigError(f"a dialogue run needs at least one scenario, not {count}")
    seed = settings.seed
    scenarios = [domain.scenario(derive(seed, game, i)) for i in range(offset, offset + count)]
    tree_args = {
        "replies": settings.replies,
        "seeds": settings.seeds,
        "seed": seed,
        "sampling": sampling_of(settings),
        "judge_fallback": settings.judge_fallback,
    }
    return domain, scenarios, tree_args


def solve_trees(trees: list, algorithm: str, iterations: int, points: int) -> dict[str, Any]:
    """Solves every expanded tree with CFR / CFR+; a tree holding a dialogue without a payoff
    is not a game to solve and is listed under ``failed`` (its reason under ``failures``).
    Returns ``results`` (per-scenario metrics), ``policies`` (readable, by scenario),
    ``curves``, ``failed``, ``failures`` and ``seconds``."""
    from stratagem.solvers.cfr import solve
    from stratagem.solvers.dialogue.expansion import failed_scenarios
    from stratagem.solvers.dialogue.metrics import scenario_metrics

    results, policies, curves = [], {}, {}
    failures = failed_scenarios(trees)
    failed = list(failures)
    start = time.perf_counter()
    for tree in trees:
        if tree.scenario.id in failures:
            continue
        solution = solve(tree.root, algorithm, iterations, points=points)
        results.append(scenario_metrics(tree.scenario.id, tree.root, solution.policy))
        policies[tree.scenario.id] = readable_policy(tree, solution.policy)
        curves[tree.scenario.id] = solution.curve
    return {
        "results": results,
        "policies": policies,
        "curves": curves,
        "failed": failed,
        "failures": failures,
        "seconds": time.perf_counter() - start,
    }


def readable_policy(tree: Any, policy: Any) -> list[dict[str, Any]]:
    """Each information set of ``tree`` with its seat, own instructions, dialogue and policy."""
    from stratagem.tree import walk

    out, seen = [], set()
    node: Any  # a DialogueNode (walk yields the Node protocol)
    for node in walk(tree.root):
        if node.player in (0, 1) and node.infoset() not in seen:
            seen.add(node.infoset())
            out.append(
                {
                    "infoset": node.infoset(),
                    "seat": node.player,
                    "own": list(tree.own(node.path, node.player)),
                    "dialogue": list(node.messages()),
                    "policy": policy[node.infoset()],
                }
            )
    return out
