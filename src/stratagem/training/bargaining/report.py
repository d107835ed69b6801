"""Bargaining GRPO's checkpoint evaluation and run-folder reports (SPEC §8; seed 004 Table 7):
the tournament slice a checkpoint is scored by, ``stages.md`` (Base → SFT → RL) and
``curve.png``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from stratagem.episode import EpisodeSpec
from stratagem.game import Game
from stratagem.games.bargaining import BUYER, SELLER, Bargaining
from stratagem.metrics.bargaining import ROLES, negotiation_rows
from stratagem.metrics.estimate import Estimate, mean_estimate
from stratagem.play import play
from stratagem.seeding import derive
from stratagem.training.checkpoints import TrainerState
from stratagem.training.rollouts import opponent as opponent_agent

BASE_EVAL = "base_eval.json"


def evaluation_specs(
    agent: Any, opponents: list[str], scenarios: list[Any], seed: int
) -> list[EpisodeSpec]:
    """``agent`` against each opponent in both roles on every scenario (the agent's row and
    column of a round robin on the same scenarios)."""
    specs = []
    for name in opponents:
        opponent = opponent_agent("bargaining", name)
        for i, scenario in enumerate(scenarios):
            episode_seed = derive(seed, "bargaining-eval", i)
            for seat in (SELLER, BUYER):
                agents = (agent, opponent) if seat == SELLER else (opponent, agent)
                meta = {"seat": seat, "opponent": name, "index": i}
                episode_id = f"{name}/{ROLES[seat]}/{i}"
                specs.append(EpisodeSpec(episode_id, episode_seed, agents, meta, scenario))
    return specs


def tournament_slice(
    game: Game, agent: Any, opponents: list[str], gft: int, ngft: int, seed: int
) -> dict[str, Any]:
    """Plays ``agent`` against ``opponents`` in both roles on ``gft`` + ``ngft`` scenarios of
    ``game`` and returns its row: per role the GFT ``deal_rate``, ``surplus_share`` (valid
    deals), ``violation`` and the NGFT ``ngft_violation`` (keys ``seller/deal_rate`` ...), and
    ``score``, each ``{"value", "stderr", "n"}``."""
    catalog = game
    assert isinstance(catalog, Bargaining), "a tournament slice plays the bargaining game"
    scenarios = catalog.tournament_scenarios(gft, ngft, seed)
    specs = evaluation_specs(agent, opponents, scenarios, seed)
    rows = [r for r in negotiation_rows(play(game, specs)) if r["agent"] == agent.name]
    out: dict[str, Any] = {}
    for role in ROLES:
        gft_rows = [r for r in rows if r["role"] == role and r["regime"] == "GFT"]
        ngft_rows = [r for r in rows if r["role"] == role and r["regime"] == "NGFT"]
        shares = [r["surplus_share"] for r in gft_rows if not math.isnan(r["surplus_share"])]
        out[f"{role}/deal_rate"] = mean_estimate([r["deal"] for r in gft_rows])
        out[f"{role}/surplus_share"] = mean_estimate(shares)
        out[f"{role}/violation"] = mean_estimate([r["violation"] for r in gft_rows])
        out[f"{role}/ngft_violation"] = mean_estimate([r["violation"] for r in ngft_rows])
    out["score"] = mean_estimate(
        [
            0.0 if math.isnan(r["surplus_share"]) else r["surplus_share"]
            for r in rows
            if r["regime"] == "GFT"
        ]
    )
    return {k: asdict(v) if isinstance(v, Estimate) else v for k, v in out.items()}


def stages(
    state: TrainerState, folder: Path, adapter: str | None
) -> list[tuple[str, dict[str, Any]]]:
    """(label, evaluation row) of each training stage so far of the run in ``folder``: Base, SFT
    (when training started from ``adapter``), RL (the best checkpoint and, when another, the
    last)."""
    out: list[tuple[str, dict[str, Any]]] = []
    base = folder / BASE_EVAL
    if adapter:
        if base.exists():
            out.append(("Base", json.loads(base.read_text())))
        out.append(("SFT", state.evals[0]))
    else:
        out.append(("Base", state.evals[0]))
    if state.best is not None and state.best.step > 0:
        best = next(e for e in state.evals if e["step"] == state.best.step)
        out.append((f"RL (best, step {best['step']})", best))
    last = state.evals[-1]
    if last["step"] > 0 and (state.best is None or last["step"] != state.best.step):
        out.append((f"RL (last, step {last['step']})", last))
    return out


STAGE_COLUMNS = (
    ("deal_rate", "GFT deal rate %"),
    ("surplus_share", "surplus share %"),
    ("violation", "GFT violation %"),
    ("ngft_violation", "NGFT violation %"),
)


def stage_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """A Markdown table: one line per (stage, role), percentages ± one standard error, and the
    checkpoint score (over both roles: Σ valid GFT surplus shares / N, i.e. surplus share ×
    valid-deal rate)."""
    head = [
        "stage",
        "role",
        *(title for _, title in STAGE_COLUMNS),
        "score % (share × valid-deal rate)",
    ]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---"] * 2 + ["---:"] * 5) + " |"]
    for label, row in rows:
        for role in ROLES:
            cells = [_percent(row.get(f"{role}/{key}")) for key, _ in STAGE_COLUMNS]
            lines.append(
                f"| {label} | {role} | " + " | ".join(cells) + f" | {_percent(row['score'])} |"
            )
    return "\n".join(lines) + "\n"


def _percent(e: dict[str, Any] | None) -> str:
    if not e or not e["n"]:
        return "–"
    return f"{100 * e['value']:.1f} ± {100 * e['stderr']:.1f}"


def write_json(path: Path, data: Any) -> None:
    """Writes ``data`` as JSON to ``path`` atomically (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, path)


def plot_curve(out: Path, state: TrainerState) -> None:
    """``curve.png``: the checkpoint score and per-role GFT deal rate (± one standard error),
    and the mean rollout reward per step with its four terms."""
    if not state.evals and not state.log:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    if state.evals:
        steps = [e["step"] for e in state.evals]
        for key in ("score", "seller/deal_rate", "buyer/deal_rate", "seller/ngft_violation"):
            values = [e[key]["value"] for e in state.evals]
            errors = [e[key]["stderr"] for e in state.evals]
            ax.errorbar(steps, values, yerr=errors, label=key, marker="o", capsize=3)
        ax.set_xlabel("step")
        ax.legend()
        ax.set_title("checkpoints (greedy tournament slice)")
    if state.log:
        steps = [e["step"] for e in state.log]
        for key in ("reward", "format", "execution", "consistency", "surplus"):
            bx.plot(steps, [e[key] for e in state.log], marker=".", label=key)
        bx.set_xlabel("step")
        bx.legend()
        bx.set_title("mean rollout reward and its terms")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)
    plt.close(fig)
