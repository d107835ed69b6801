"""``stratagem imitate``: learn CFR's instruction policy from text and steer held-out dialogues.

Expands the trees of ``--train`` and ``--test`` scenarios of a dialogue game together (one
batched model call per depth), solves every tree with CFR, trains the imitation MLP on the
training trees' (embedded information state, CFR policy) pairs (``training.imitation``), steers
the held-out trees with it and evaluates the 2×2 meta-game steered vs unsteered LLM (seed 003
§4). Writes the config, ``losses.csv`` and ``loss.png``, the MLP (``mlp.pt``), the meta-game
(``meta_game.json``), ``summary.json`` and ``table.md``. A failed generation stops it before CFR.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

from pydantic import Field
from rich.console import Console

from stratagem.cli.options import RunGroup
from stratagem.errors import ConfigError
from stratagem.settings import Positive, opt, resolved
from stratagem.solvers.dialogue.setup import DialogueSettings

console = Console()


@dataclasses.dataclass(kw_only=True)
class ImitateConfig(RunGroup, DialogueSettings):
    """Train an MLP to imitate CFR's instruction policy and test it on held-out scenarios."""

    game: str = opt(..., "-g")
    """Dialogue game: meeting, fruit, debate."""
    train: Positive = 8
    """Training scenarios."""
    test: Positive = 4
    """Held-out scenarios."""
    iterations: Positive = opt(1000, "-n")
    """CFR+ iterations per tree."""
    hidden: Positive = 128
    """MLP hidden width."""
    steps: Positive = 1000
    """Adam steps."""
    batch_size: Positive = 64
    """Examples per Adam step."""
    lr: Annotated[float, Field(gt=0)] = 1e-3
    """Adam learning rate."""


def imitate_command(cfg: ImitateConfig) -> None:
    """Train an MLP to imitate CFR's instruction policy and test it on held-out scenarios."""
    import torch

    from stratagem.report.solve import imitation_table
    from stratagem.report.solver_plots import plot_loss
    from stratagem.solvers.dialogue import DialogueTree, check_solvable, expand, setup
    from stratagem.solvers.games import dialogue_games
    from stratagem.training import imitation

    if cfg.game not in dialogue_games():
        raise ConfigError(
            f"imitate needs a dialogue game ({', '.join(dialogue_games())}), not {cfg.game!r}"
        )
    # everything the run depends on, before the first model call: settings, then the embedder
    domain, scenarios, tree_args = setup.dialogue_setup(cfg, cfg.game, cfg.train + cfg.test)
    embed = imitation.load_embedder()
    folder = cfg.run_folder(Path("runs") / f"imitate-{cfg.game}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(resolved(cfg), indent=2) + "\n")
    backend = setup.cached_backend(cfg)
    trees = [DialogueTree(domain, s, backend, **tree_args) for s in scenarios]
    stats = expand(trees)
    console.print(
        f"expanded {len(trees)} trees: {stats.nodes} nodes, {stats.messages} messages, "
        f"{stats.model_calls} model calls, {stats.cache_hits} cache hits, {stats.seconds:.1f} s"
    )
    check_solvable(trees)  # exit 1 naming the scenarios with failed generations; rerun retries
    start = time.perf_counter()
    policies = imitation.cfr_policies(trees, cfg.iterations)
    solve_seconds, start = time.perf_counter() - start, time.perf_counter()
    held_out = trees[cfg.train :]
    data = imitation.build_dataset(trees[: cfg.train], policies[: cfg.train], embed)
    args = imitation.Args(cfg.hidden, cfg.steps, cfg.batch_size, cfg.lr, cfg.seed)
    model, losses = imitation.train(data, args)
    train_seconds = time.perf_counter() - start
    steered = [imitation.steered_policy(t, model, embed, data.instructions) for t in held_out]
    report = imitation.meta_game(held_out, steered)
    oracle = imitation.meta_game(held_out, policies[cfg.train :])  # CFR on the held-out trees
    torch.save(model.state_dict(), folder / "mlp.pt")
    (folder / "losses.csv").write_text(
        "step,loss\n" + "".join(f"{i + 1},{x!r}\n" for i, x in enumerate(losses))
    )
    plot_loss(losses, folder / "loss.png", f"{cfg.game}: imitation loss")
    games = {"steered": asdict(report), "cfr_on_held_out": asdict(oracle)}
    (folder / "meta_game.json").write_text(json.dumps(games, indent=2) + "\n")
    final_loss = sum(losses[-50:]) / len(losses[-50:])
    summary = {
        "game": cfg.game, "model": backend.model_id, "instructions": list(data.instructions),
        "train_scenarios": cfg.train, "test_scenarios": cfg.test, "examples": len(data.texts),
        "final_loss": final_loss, "steered_mass": report.steered_mass,
        "cfr_mass": oracle.steered_mass,
        "expansion": {k: v for k, v in asdict(stats).items() if k != "batches"},
        "solve_seconds": solve_seconds, "train_seconds": train_seconds,
    }  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = imitation_table(cfg, report, oracle, len(data.texts), final_loss)
    (folder / "table.md").write_text(table)
    console.print(table)
    console.print(f"wrote {folder}")
