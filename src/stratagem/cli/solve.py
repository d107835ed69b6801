"""``stratagem solve``: CFR or CFR+ on a solver game's tree (Kuhn, Leduc poker) or on the
LLM-expanded trees of a dialogue game (``meeting``, ``fruit``, ``debate``; seed 003).

Poker writes into the run folder: the resolved config, the average policy (``policy.json``), the
exploitability curve (``curve.csv`` and ``exploitability.png``) and a summary with the game value.

A dialogue game expands one tree per scenario (``solvers.expand``: one batched model call per
depth for all scenarios, through the response cache), solves each with CFR, and writes: the
config, ``expansion.json`` (tree sizes, model calls, cache hits, seconds), ``dialogues.jsonl``
(every finished dialogue with its payoff), ``policy.json`` (the CFR policy per scenario, each
information set with its dialogue), ``metrics.csv`` (CFR Gain per player and NashConv per
scenario), ``summary.json`` and ``table.md`` (seed 003 Table 1's columns with their spread over
scenarios), ``metrics.png`` and ``exploitability.png``; with ``--steering`` / ``--judge``, the
steering and judge accuracy tables (``steering.md``, ``judge.md``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from stratagem.cli.config import load_config
from stratagem.cli.evaluate import RAY_ADDRESS_OPTION, RAY_OPTION, WORKERS_OPTION, ray_target
from stratagem.errors import ConfigError, did_you_mean
from stratagem.runs import check_out_path
from stratagem.tree import Node

if TYPE_CHECKING:
    from stratagem.solvers.expand import CachedBackend

console = Console()
SOLVER_ONLY = ("leduc",)  # solver games that are not text games (not in the game registry)
KNOWN_VALUES = {"kuhn": (-1 / 18, "Kuhn 1950")}  # player 0's game value, with its source


class DialogueOptions(BaseModel):
    """The settings of LLM-expanded dialogue trees (shared by solve, psro and imitate)."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field("hf", description="hf, hf:MODEL, openai:MODEL or vllm: writes and judges")
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    instructions: list[str] | None = Field(None, description="the domain's default set")
    scenarios: int = Field(3, gt=0)
    replies: int = Field(2, gt=0, description="messages after the opening")
    seeds: int = Field(2, gt=0, description="LLM seeds per message (chance outcomes)")
    temperature: float = Field(0.8, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_new_tokens: int = Field(48, gt=0)
    judge_fallback: bool = True
    seed: int = 0
    cache: str | None = Field(None, description="response cache [~/.cache/stratagem/...]")
    max_batch: int = Field(64, gt=0)
    ray: str | None = Field(None, description="'local' or a Ray cluster address (runtime only)")
    workers: int | None = Field(None, gt=0, description="Ray workers (runtime only)")


class SolveConfig(DialogueOptions):
    """Every ``stratagem solve`` setting (flags override a config file's); the dialogue
    settings apply to dialogue games only."""

    game: str
    algorithm: Literal["cfr", "cfr+"] = "cfr+"
    iterations: int = Field(1000, gt=0)
    points: int = Field(60, gt=0, description="checkpoints on the exploitability curve")
    steering: int = Field(0, ge=0, description="messages per instruction to classify")
    judge: int = Field(0, ge=0, description="templated dialogues per outcome type to judge")
    out: str | None = None


def solver_tree(game: str) -> Node:
    """Returns the solver tree of ``game``: Leduc, or a registered game declaring one (Kuhn);
    raises ``ConfigError`` for a game without one."""
    if game == "leduc":
        from stratagem.games.leduc import game_tree

        return game_tree()
    from stratagem.game import HasSolverTree
    from stratagem.games import game_names, get_game

    if game not in game_names():
        from stratagem.games.dialogue import DOMAINS

        names = sorted({*SOLVER_ONLY, *game_names(), *DOMAINS})
        raise ConfigError(f"unknown game {game!r}{did_you_mean(game, names)}")
    the_game = get_game(game)
    if not isinstance(the_game, HasSolverTree):
        raise ConfigError(f"game {game!r} has no solver tree (solver games: kuhn, leduc)")
    return the_game.game_tree()


def solve_command(
    game: str = typer.Option(
        None, "--game", "-g", help="kuhn, leduc, or a dialogue game: meeting, fruit, debate."
    ),
    algorithm: str = typer.Option(None, "--algorithm", "-a", help="cfr or cfr+ (default: cfr+)."),
    iterations: int = typer.Option(None, "--iterations", "-n", help="Iterations (default: 1000)."),
    points: int = typer.Option(None, help="Checkpoints on the exploitability curve (default: 60)."),
    out: str = typer.Option(
        None, "--out", "-o", help="Run folder (default: runs/solve-<game>-<alg>)."
    ),
    agent: str = typer.Option(None, help="Dialogue: hf[:MODEL], openai:MODEL, vllm (default hf)."),
    base_url: str = typer.Option(None, help="Dialogue: the openai endpoint."),
    instructions: str = typer.Option(
        None, help="Dialogue: comma-separated instructions (default: the domain's)."
    ),
    scenarios: int = typer.Option(None, help="Dialogue: scenarios to solve (default 3)."),
    replies: int = typer.Option(None, help="Dialogue: messages after the opening (default 2)."),
    seeds: int = typer.Option(None, help="Dialogue: LLM seeds per message (default 2)."),
    temperature: float = typer.Option(None, help="Dialogue: sampling temperature (default 0.8)."),
    max_new_tokens: int = typer.Option(None, help="Dialogue: tokens per message (default 48)."),
    seed: int = typer.Option(None, "--seed", "-s", help="Dialogue: scenario seed (default 0)."),
    cache: str = typer.Option(None, help="Dialogue: response cache file (SQLite)."),
    steering: int = typer.Option(
        None, help="Dialogue: classify up to N messages per instruction (default 0: skip)."
    ),
    judge: int = typer.Option(
        None, help="Dialogue: judge N templated dialogues per outcome type (default 0: skip)."
    ),
    ray: bool = RAY_OPTION,
    ray_address: str = RAY_ADDRESS_OPTION,
    workers: int = WORKERS_OPTION,
    config: Path = typer.Option(None, "--config", "-c", help="YAML or TOML file of settings."),
) -> None:
    """Solve a poker game with CFR or CFR+ (policy, value, exploitability curve), or a dialogue
    game's LLM-expanded trees (CFR policy, CFR Gain, NashConv, tree sizes and model calls)."""
    from stratagem.games.dialogue import DOMAINS
    from stratagem.solvers.cfr import solve

    cfg = load_config(
        SolveConfig,
        config,
        game=game,
        algorithm=algorithm,
        iterations=iterations,
        points=points,
        out=out,
        agent=agent,
        base_url=base_url,
        instructions=split_list(instructions),
        scenarios=scenarios,
        replies=replies,
        seeds=seeds,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        cache=cache,
        steering=steering,
        judge=judge,
        ray=ray_target(ray, ray_address, workers),
        workers=workers,
    )
    if cfg.game in DOMAINS:
        return solve_dialogue(cfg)
    dialogue_only = cfg.model_fields_set & (
        set(DialogueOptions.model_fields) | {"steering", "judge"}
    )
    if dialogue_only:
        raise ConfigError(
            f"{', '.join(sorted(dialogue_only))}: dialogue settings; {cfg.game} is not a "
            f"dialogue game (dialogue games: {', '.join(DOMAINS)})"
        )
    tree = solver_tree(cfg.game)
    folder = check_out_path(cfg.out or Path("runs") / f"solve-{cfg.game}-{cfg.algorithm}")
    folder.mkdir(parents=True, exist_ok=True)
    solution = solve(tree, cfg.algorithm, cfg.iterations, points=cfg.points)
    (folder / "config.json").write_text(cfg.model_dump_json(indent=2) + "\n")
    (folder / "policy.json").write_text(json.dumps(solution.policy, indent=2, sort_keys=True))
    (folder / "curve.csv").write_text(
        "iteration,exploitability\n" + "".join(f"{i},{e!r}\n" for i, e in solution.curve)
    )
    summary = {
        "game": cfg.game,
        "algorithm": cfg.algorithm,
        "iterations": cfg.iterations,
        "value": list(solution.value),
        "exploitability": solution.exploitability,
        "seconds": solution.seconds,
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    png = plot_curve(solution.curve, folder / "exploitability.png", f"{cfg.game} · {cfg.algorithm}")
    table = Table(title=f"{cfg.algorithm} on {cfg.game}, {cfg.iterations} iterations")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("game value (player 0)", f"{solution.value[0]:.6f}")
    if cfg.game in KNOWN_VALUES:
        value, source = KNOWN_VALUES[cfg.game]
        table.add_row(f"published value ({source})", f"{value:.6f}")
    table.add_row("exploitability (NashConv / 2)", f"{solution.exploitability:.3e}")
    table.add_row("seconds iterating", f"{solution.seconds:.3f}")
    console.print(table)
    console.print(f"wrote {folder / 'policy.json'}, {folder / 'curve.csv'} and {png}")


def split_list(text: str | None) -> list[str] | None:
    """``"a, b,c"`` -> ``["a", "b", "c"]``; None stays None."""
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


def plot_curve(curve: tuple[tuple[int, float], ...], path: Path, title: str) -> Path:
    """Draws exploitability against iterations (log-log) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys = zip(*curve, strict=True)
    ax.loglog(xs, [max(y, 1e-16) for y in ys], marker=".")
    ax.set_xlabel("iteration")
    ax.set_ylabel("exploitability of the average policy")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def make_backend(opts: DialogueOptions) -> Any:
    """The model an ``--agent`` spec names, for writing and judging dialogue (no agent
    wrapper: the trees call the backend directly); with ``ray``, a ``RayBackend`` whose
    workers each hold one copy of it and answer a shard of every call."""
    import functools

    from stratagem.agents.spec import LLMOptions, is_llm
    from stratagem.agents.spec import make_backend as backend_of

    if not is_llm(opts.agent):
        raise ConfigError(
            f"unknown agent {opts.agent!r}: use hf, hf:MODEL, openai:MODEL or vllm[:MODEL]"
        )
    options = LLMOptions(
        base_url=opts.base_url, api_key_env=opts.api_key_env, max_batch=opts.max_batch
    )
    if opts.workers is not None and opts.ray is None:
        raise ConfigError("workers sets the number of Ray workers: set ray too")
    if opts.ray is None:
        return backend_of(opts.agent, options)
    from stratagem.backends.sharded import RayBackend

    return RayBackend(
        functools.partial(backend_of, opts.agent, options), address=opts.ray, workers=opts.workers
    )


def cached_backend(opts: DialogueOptions) -> CachedBackend:
    """``make_backend`` behind the persistent response cache (``--cache``, default
    ``<stratagem cache>/dialogue.sqlite``)."""
    from stratagem.backends.embedded import cache_root
    from stratagem.solvers.expand import CachedBackend

    path = Path(opts.cache) if opts.cache else cache_root() / "dialogue.sqlite"
    return CachedBackend(make_backend(opts), path)


def dialogue_setup(opts: DialogueOptions, game: str, count: int, offset: int = 0):
    """The domain, ``count`` scenarios (the i-th seeded by ``derive(seed, game, i)``, from
    ``offset``) and the tree settings of ``opts``."""
    from stratagem.backends.base import Sampling
    from stratagem.games.dialogue import get_domain
    from stratagem.seeding import derive

    domain = get_domain(game, opts.instructions)
    scenarios = [domain.scenario(derive(opts.seed, game, i)) for i in range(offset, offset + count)]
    tree_args = {
        "replies": opts.replies,
        "seeds": opts.seeds,
        "seed": opts.seed,
        "sampling": Sampling(opts.temperature, opts.top_p, opts.max_new_tokens),
        "judge_fallback": opts.judge_fallback,
    }
    return domain, scenarios, tree_args


def solve_dialogue(cfg: SolveConfig) -> None:
    """``stratagem solve`` on a dialogue game (see the module docstring)."""
    from stratagem.metrics.dialogue import scenario_metrics, summarize
    from stratagem.solvers.cfr import solve
    from stratagem.solvers.expand import DialogueTree, expand

    folder = check_out_path(cfg.out or Path("runs") / f"solve-{cfg.game}-{cfg.algorithm}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(cfg.model_dump_json(indent=2) + "\n")
    domain, scenarios, tree_args = dialogue_setup(cfg, cfg.game, cfg.scenarios)
    backend = cached_backend(cfg)
    trees = [DialogueTree(domain, s, backend, **tree_args) for s in scenarios]
    console.print(
        f"expanding {len(trees)} {cfg.game} trees: {cfg.replies} replies, {cfg.seeds} seeds, "
        f"instructions {', '.join(domain.instructions)} ({backend.model_id})"
    )
    stats = expand(trees)
    (folder / "expansion.json").write_text(json.dumps(asdict(stats), indent=2) + "\n")
    with (folder / "dialogues.jsonl").open("w") as f:
        for tree in trees:
            for row in tree.dialogues():
                f.write(json.dumps(row) + "\n")
    results, policies, curves, failed = [], {}, {}, []
    start = time.perf_counter()
    for tree in trees:
        if any(o.values is None for o in tree.outcomes.values()):
            failed.append(tree.scenario.id)  # a dialogue without a payoff: no game to solve
            continue
        solution = solve(tree.root, cfg.algorithm, cfg.iterations, points=cfg.points)
        results.append(scenario_metrics(tree.scenario.id, tree.root, solution.policy))
        policies[tree.scenario.id] = _readable_policy(tree, solution.policy)
        curves[tree.scenario.id] = solution.curve
    solve_seconds = time.perf_counter() - start
    (folder / "policy.json").write_text(json.dumps(policies, indent=2) + "\n")
    _write_metrics(folder, results)
    summary = summarize(results) if results else {}
    report = {
        "game": cfg.game,
        "model": backend.model_id,
        "instructions": list(domain.instructions),
        "scenarios": len(trees),
        "solved": len(results),
        "failed": failed,
        **{k: asdict(v) for k, v in summary.items()},
        "expansion": {k: v for k, v in asdict(stats).items() if k != "batches"},
        "solve_seconds": solve_seconds,
    }
    (folder / "summary.json").write_text(json.dumps(report, indent=2) + "\n")
    (folder / "table.md").write_text(_table_md(cfg, backend.model_id, stats, summary, results))
    if results:
        _plot_metrics(results, folder / "metrics.png", f"{cfg.game}: CFR Gain and NashConv")
        _plot_curves(curves, folder / "exploitability.png", f"{cfg.game} · {cfg.algorithm}")
    _print_dialogue_tables(cfg, stats, results, summary, failed)
    if cfg.steering:
        _steering(cfg, domain, trees, backend, folder)
    if cfg.judge:
        _judge(cfg, domain, backend, folder)
    console.print(f"wrote {folder}")


def _readable_policy(tree, policy) -> list[dict[str, Any]]:
    """Each information set of ``tree`` with its seat, own instructions, dialogue and policy."""
    from stratagem.tree import walk

    out, seen = [], set()
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


def _write_metrics(folder: Path, results) -> None:
    lines = ["scenario,cfr_gain_0,cfr_gain_1,cfr_gain,nash_conv,any_0,any_1,cfr_0,cfr_1"]
    for r in results:
        lines.append(
            f"{r.scenario},{r.cfr_gain[0]!r},{r.cfr_gain[1]!r},{r.mean_gain!r},{r.nash_conv!r},"
            f"{r.value_any[0]!r},{r.value_any[1]!r},{r.value_cfr[0]!r},{r.value_cfr[1]!r}"
        )
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")


def _table_md(cfg: SolveConfig, model: str, stats, summary, results) -> str:
    head = (
        "| domain | model | scenarios | replies × seeds × instructions | nodes | messages | "
        "model calls | cache hits | seconds | CFR Gain | NashConv |\n"
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    gain = str(summary["cfr_gain"]) if summary else "—"
    conv = str(summary["nash_conv"]) if summary else "—"
    n_instr = len(cfg.instructions) if cfg.instructions else "default"
    return head + (
        f"| {cfg.game} | {model} | {len(results)} | {cfg.replies} × {cfg.seeds} × {n_instr} | "
        f"{stats.nodes} | {stats.messages} | {stats.model_calls} | {stats.cache_hits} | "
        f"{stats.seconds:.1f} | {gain} | {conv} |\n"
    )


def _print_dialogue_tables(cfg, stats, results, summary, failed) -> None:
    table = Table(title=f"{cfg.game}: trees")
    for column in ("nodes", "infosets", "messages", "model calls", "generated", "cache hits"):
        table.add_column(column, justify="right")
    table.add_column("structured lines", justify="right")
    table.add_column("judge ok / fallback / failed", justify="right")
    table.add_column("seconds", justify="right")
    table.add_row(
        str(stats.nodes),
        str(stats.infosets),
        str(stats.messages),
        str(stats.model_calls),
        str(stats.generated),
        str(stats.cache_hits),
        f"{stats.structured}/{stats.messages}",
        f"{stats.judged} / {stats.judge_fallbacks} / {stats.judge_failures}",
        f"{stats.seconds:.1f}",
    )
    console.print(table)
    table = Table(title=f"{cfg.game}: {cfg.algorithm} × {cfg.iterations} per scenario")
    for column in ("scenario", "CFR Gain 0", "CFR Gain 1", "NashConv", "any/any", "CFR/CFR"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r.scenario,
            f"{r.cfr_gain[0]:+.3f}",
            f"{r.cfr_gain[1]:+.3f}",
            f"{r.nash_conv:.2e}",
            f"{r.value_any[0]:.2f} / {r.value_any[1]:.2f}",
            f"{r.value_cfr[0]:.2f} / {r.value_cfr[1]:.2f}",
        )
    console.print(table)
    if summary:
        console.print(
            f"CFR Gain {summary['cfr_gain']} · NashConv {summary['nash_conv']} "
            f"(mean ± std over {summary['cfr_gain'].n} scenarios)"
        )
    if failed:
        console.print(f"not solved (a judge answer did not parse): {', '.join(failed)}")


def _steering(cfg, domain, trees, backend, folder: Path) -> None:
    from stratagem.metrics.dialogue import steering_accuracy, steering_samples

    report = steering_accuracy(domain, steering_samples(trees, cfg.steering), backend)
    rows = report.rows()
    exact = report.exact is not None
    lines = [
        f"Steering accuracy, {cfg.game} ({backend.model_id}); chance {report.chance:.3f}; "
        f"{report.fallbacks} answers read by the constrained fallback\n",
        "| instruction | classifier accuracy | n |" + (" structured line |" if exact else ""),
        "| --- | ---: | ---: |" + (" ---: |" if exact else ""),
    ]
    for r in rows:
        cell = f" {r['exact']:.3f} |" if exact and r.get("exact") is not None else ""
        lines.append(f"| {r['instruction']} | {r['accuracy']:.3f} | {r['n']} |" + cell)
    (folder / "steering.md").write_text("\n".join(lines) + "\n")
    (folder / "steering.json").write_text(json.dumps(rows, indent=2) + "\n")
    console.print("\n".join(lines))


def _judge(cfg, domain, backend, folder: Path) -> None:
    from stratagem.metrics.dialogue import judge_accuracy

    if not domain.structured:
        console.print(f"judge accuracy: {cfg.game} has no exact payoff to compare with; skipped")
        return
    rows = judge_accuracy(domain, backend, per_outcome=cfg.judge, seed=cfg.seed)
    lines = [
        f"Judge accuracy, {cfg.game} ({backend.model_id}); {cfg.judge} dialogues per type, "
        "2 answers each\n",
        "| outcome | Norm | Sgn | answers scored | no number |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {r.outcome} | {r.norm:.3f} | {r.sgn:.3f} | {r.n} | {r.failures} |" for r in rows]
    (folder / "judge.md").write_text("\n".join(lines) + "\n")
    (folder / "judge.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    console.print("\n".join(lines))


def _plot_metrics(results, path: Path, title: str) -> Path:
    """CFR Gain per player and NashConv per scenario, as grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    xs = np.arange(len(results))
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(results) + 2), 4))
    ax.bar(xs - 0.25, [r.cfr_gain[0] for r in results], 0.25, label="CFR Gain, player 0")
    ax.bar(xs, [r.cfr_gain[1] for r in results], 0.25, label="CFR Gain, player 1")
    ax.bar(xs + 0.25, [r.nash_conv for r in results], 0.25, label="NashConv of CFR")
    ax.set_xticks(xs, [r.scenario for r in results], rotation=20, fontsize=8)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_curves(curves: dict, path: Path, title: str) -> Path:
    """Exploitability (NashConv / 2) of the average policy per scenario, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        xs, ys = zip(*curve, strict=True)
        ax.loglog(xs, [max(y, 1e-16) for y in ys], label=name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("NashConv / 2 of the average policy")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
