"""The steering jobs end to end (seed 003 §4): ``imitate`` and ``dialogue``. The maths is in
``training.imitation`` and ``solvers.dialogue.live``; this module checks the settings, sequences
the steps and writes the run folder. Each job is ``prepare`` (everything the run depends on,
checked before any folder is written or model called) then ``run``.

- ``imitate``: expand the training and held-out trees, solve them with CFR, train the imitation
  MLP, steer the held-out trees with it; writes ``losses.csv``, ``loss.png``, the MLP
  (``mlp.pt``, loadable with ``imitation.load_policy``: instruction set, embedder, layer widths
  and weights), ``meta_game.json``, ``summary.json`` and ``table.md``.
- ``dialogue``: live dialogues with one seat steered by a saved MLP or by the CFR policy, and
  the elected-steered meta-game played from them; writes ``dialogues.jsonl``,
  ``meta_game.json``, ``summary.json`` and ``table.md``.

A failed generation ends either job with ``UnsolvedScenarios`` (exit 1) naming the scenarios,
after writing what it could; failures are never cached, so running again retries them.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any


def prepare_imitation(cfg: Any) -> tuple:
    """Checks everything the job ``cfg`` (the ``imitate`` command's settings) depends on, before
    any folder is written or model called: the settings and instructions (``ConfigError``),
    then the embedder. Returns what ``run_imitation`` takes."""
    from stratagem.solvers.dialogue import setup
    from stratagem.training import imitation

    domain, scenarios, tree_args = setup.dialogue_setup(cfg, cfg.game, cfg.train + cfg.test)
    return domain, scenarios, tree_args, imitation.load_embedder()


def run_imitation(cfg: Any, prepared: tuple, folder: Path, log: Any = print) -> str:
    """Runs the job ``cfg`` (checked by ``prepare_imitation``) into ``folder``; returns the Markdown
    table it wrote."""
    from stratagem.report.solve import imitation_table
    from stratagem.report.solver_plots import plot_loss
    from stratagem.solvers.dialogue import DialogueTree, check_solvable, expand, setup
    from stratagem.training import imitation

    domain, scenarios, tree_args, embed = prepared
    backend = setup.cached_backend(cfg)
    trees = [DialogueTree(domain, s, backend, **tree_args) for s in scenarios]
    stats = expand(trees)
    log(
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
    meta = {"game": cfg.game, "seed": cfg.seed, "train_scenarios": cfg.train}
    meta |= {"llm": backend.model_id, "iterations": cfg.iterations}
    imitation.save_policy(folder / "mlp.pt", model, data.instructions, **meta)
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
    return table


def prepare_live(cfg: Any) -> tuple:
    """Checks the ``dialogue`` job ``cfg``: the MLP and its embedder load (``--steer FILE``;
    its instruction set becomes the run's, and the scenarios start after its training ones
    unless ``offset`` says otherwise), then the settings. Returns what ``run_live`` takes."""
    from stratagem.errors import ConfigError
    from stratagem.solvers.dialogue import setup
    from stratagem.solvers.games import dialogue_games

    if cfg.game not in dialogue_games():
        raise ConfigError(f"dialogue needs a dialogue game ({', '.join(dialogue_games())})")
    policy, offset = None, cfg.offset or 0
    if cfg.steer != "cfr":
        from stratagem.training import imitation

        policy = imitation.load_policy(cfg.steer)  # the file first: the embedder takes seconds
        policy.embed = imitation.load_embedder()
        if cfg.instructions and tuple(cfg.instructions) != policy.instructions:
            raise ConfigError(f"--instructions: the MLP steers with {policy.instructions}")
        cfg.instructions = list(policy.instructions)
        offset = policy.meta.get("train_scenarios", 0) if cfg.offset is None else cfg.offset
    return policy, *setup.dialogue_setup(cfg, cfg.game, cfg.scenarios, offset)


def run_live(cfg: Any, prepared: tuple, folder: Path, console: Any) -> None:
    """Plays the ``dialogue`` job ``cfg`` (checked by ``prepare_live``) into ``folder``."""
    from stratagem.report.solve import write_live
    from stratagem.solvers.dialogue import live, setup

    policy, domain, scenarios, tree_args = prepared
    backend = setup.cached_backend(cfg)
    steer = policy or live.cfr_steer(domain, scenarios, backend, cfg.iterations, **tree_args)
    played, meta = live.steered_meta_game(
        domain, scenarios, backend, steer, games=cfg.games, **tree_args
    )
    write_live(console, folder, cfg, played, meta, backend.usage, steer)
    console.print(f"wrote {folder}")
    live.check_played(played)  # after writing what was played: exit 1 naming the failures
