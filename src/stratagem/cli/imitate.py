"""``stratagem imitate``: learn CFR's instruction policy from text and steer held-out dialogues.

Expands the trees of ``--train`` and ``--test`` scenarios of a dialogue game together (one
batched model call per depth), solves every tree with CFR, trains the imitation MLP on the
training trees' (embedded information state, CFR policy) pairs (``training.imitation``), steers
the held-out trees with it and evaluates the 2×2 meta-game steered vs unsteered LLM (seed 003
§4). Writes the config, ``losses.csv`` and ``loss.png``, the MLP (``mlp.pt``), the meta-game
(``meta_game.json``), ``summary.json`` and ``table.md``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import typer
from pydantic import Field
from rich.console import Console

from stratagem.cli.config import load_config
from stratagem.cli.evaluate import RAY_ADDRESS_OPTION, RAY_OPTION, WORKERS_OPTION, ray_target
from stratagem.cli.solve import DialogueOptions, split_list
from stratagem.errors import ConfigError
from stratagem.runs import check_out_path

console = Console()


class ImitateConfig(DialogueOptions):
    """Every ``stratagem imitate`` setting (flags override a config file's)."""

    game: str
    train: int = Field(8, gt=0, description="training scenarios")
    test: int = Field(4, gt=0, description="held-out scenarios")
    iterations: int = Field(1000, gt=0, description="CFR+ iterations per tree")
    hidden: int = Field(128, gt=0)
    steps: int = Field(1000, gt=0)
    batch_size: int = Field(64, gt=0)
    lr: float = Field(1e-3, gt=0)
    out: str | None = None


def imitate_command(
    game: str = typer.Option(None, "--game", "-g", help="Dialogue game: meeting, fruit, debate."),
    agent: str = typer.Option(None, help="hf, hf:MODEL, openai:MODEL, vllm (default hf)."),
    base_url: str = typer.Option(None, help="The openai endpoint."),
    instructions: str = typer.Option(None, help="Comma-separated instructions."),
    train: int = typer.Option(None, help="Training scenarios (default 8)."),
    test: int = typer.Option(None, help="Held-out scenarios (default 4)."),
    replies: int = typer.Option(None, help="Messages after the opening (default 2)."),
    seeds: int = typer.Option(None, help="LLM seeds per message (default 2)."),
    temperature: float = typer.Option(None, help="Sampling temperature (default 0.8)."),
    max_new_tokens: int = typer.Option(None, help="Tokens per message (default 48)."),
    iterations: int = typer.Option(None, "--iterations", "-n", help="CFR+ iterations (1000)."),
    hidden: int = typer.Option(None, help="MLP hidden width (default 128)."),
    steps: int = typer.Option(None, help="Adam steps (default 1000)."),
    seed: int = typer.Option(None, "--seed", "-s", help="Scenario and training seed (0)."),
    cache: str = typer.Option(None, help="Response cache file (SQLite)."),
    out: str = typer.Option(None, "--out", "-o", help="Run folder (runs/imitate-<game>)."),
    ray: bool = RAY_OPTION,
    ray_address: str = RAY_ADDRESS_OPTION,
    workers: int = WORKERS_OPTION,
    config: Path = typer.Option(None, "--config", "-c", help="YAML or TOML file of settings."),
) -> None:
    """Train an MLP to imitate CFR's instruction policy and test it on held-out scenarios."""
    from stratagem.games.dialogue import DOMAINS
    from stratagem.solvers.dialogue import DialogueTree, expand
    from stratagem.training.imitation import (
        Args,
        build_dataset,
        cfr_policies,
        load_embedder,
        meta_game,
        steered_policy,
    )
    from stratagem.training.imitation import train as fit

    cfg = load_config(
        ImitateConfig,
        config,
        game=game,
        agent=agent,
        base_url=base_url,
        instructions=split_list(instructions),
        train=train,
        test=test,
        replies=replies,
        seeds=seeds,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        iterations=iterations,
        hidden=hidden,
        steps=steps,
        seed=seed,
        cache=cache,
        out=out,
        ray=ray_target(ray, ray_address, workers),
        workers=workers,
    )
    if cfg.game not in DOMAINS:
        raise ConfigError(f"imitate needs a dialogue game ({', '.join(DOMAINS)}), not {cfg.game!r}")
    from stratagem.cli import solve as solve_cli

    folder = check_out_path(cfg.out or Path("runs") / f"imitate-{cfg.game}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(cfg.model_dump_json(indent=2) + "\n")
    domain, scenarios, tree_args = solve_cli.dialogue_setup(cfg, cfg.game, cfg.train + cfg.test)
    backend = solve_cli.cached_backend(cfg)
    trees = [DialogueTree(domain, s, backend, **tree_args) for s in scenarios]
    stats = expand(trees)
    console.print(
        f"expanded {len(trees)} trees: {stats.nodes} nodes, {stats.messages} messages, "
        f"{stats.model_calls} model calls, {stats.cache_hits} cache hits, {stats.seconds:.1f} s"
    )
    start = time.perf_counter()
    policies = cfr_policies(trees, cfg.iterations)
    solve_seconds = time.perf_counter() - start
    embed = load_embedder()
    training, held_out = trees[: cfg.train], trees[cfg.train :]
    data = build_dataset(training, policies[: cfg.train], embed)
    args = Args(cfg.hidden, cfg.steps, cfg.batch_size, cfg.lr, cfg.seed)
    start = time.perf_counter()
    model, losses = fit(data, args)
    train_seconds = time.perf_counter() - start
    steered = [steered_policy(t, model, embed, data.instructions) for t in held_out]
    report = meta_game(held_out, steered)
    oracle = meta_game(held_out, policies[cfg.train :])  # CFR solved on the held-out trees
    import torch

    torch.save(model.state_dict(), folder / "mlp.pt")
    (folder / "losses.csv").write_text(
        "step,loss\n" + "".join(f"{i + 1},{x!r}\n" for i, x in enumerate(losses))
    )
    _plot_loss(losses, folder / "loss.png", f"{cfg.game}: imitation loss")
    (folder / "meta_game.json").write_text(
        json.dumps({"steered": asdict(report), "cfr_on_held_out": asdict(oracle)}, indent=2) + "\n"
    )
    summary = {
        "game": cfg.game,
        "model": backend.model_id,
        "instructions": list(data.instructions),
        "train_scenarios": cfg.train,
        "test_scenarios": cfg.test,
        "examples": len(data.texts),
        "final_loss": sum(losses[-50:]) / len(losses[-50:]),
        "steered_mass": report.steered_mass,
        "cfr_mass": oracle.steered_mass,
        "expansion": {k: v for k, v in asdict(stats).items() if k != "batches"},
        "solve_seconds": solve_seconds,
        "train_seconds": train_seconds,
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = _table(cfg, report, oracle, len(data.texts), summary["final_loss"])
    (folder / "table.md").write_text(table)
    console.print(table)
    console.print(f"wrote {folder}")


def _table(cfg: ImitateConfig, report, oracle, examples: int, loss: float) -> str:
    (ss, su), (us, uu) = report.row
    (css, csu), (cus, cuu) = report.col
    return (
        f"Imitation on {cfg.game}: {cfg.train} training / {cfg.test} held-out scenarios, "
        f"{examples} examples, final loss {loss:.3f}\n\n"
        "| seat 0 \\ seat 1 | steered | unsteered |\n| --- | --- | --- |\n"
        f"| steered | {ss:.2f}, {css:.2f} | {su:.2f}, {csu:.2f} |\n"
        f"| unsteered | {us:.2f}, {cus:.2f} | {uu:.2f}, {cuu:.2f} |\n\n"
        f"CCE mass on the steered LLM: seat 0 {report.steered_mass[0]:.2f}, seat 1 "
        f"{report.steered_mass[1]:.2f} (with CFR solved on the held-out trees themselves: "
        f"{oracle.steered_mass[0]:.2f}, {oracle.steered_mass[1]:.2f})\n"
    )


def _plot_loss(losses: list[float], path: Path, title: str) -> Path:
    """The training loss per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(1, len(losses) + 1), losses, lw=0.8)
    ax.set_xlabel("Adam step")
    ax.set_ylabel("soft cross-entropy to the CFR policy")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
