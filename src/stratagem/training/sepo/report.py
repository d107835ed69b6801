"""What a SEPO run's checkpoint evaluations show: ``curve.png`` (Safety J, Pay/r, Exploit,
exact exploitability; the rollout reward) and ``actions.png`` (what each checkpoint played
against each opponent), and the compact per-opponent action record each evaluation keeps."""

from __future__ import annotations

from pathlib import Path

from stratagem.metrics.actions import ALL, FIRST, ActionRate
from stratagem.training.checkpoints import TrainerState


def actions_by_opponent(rows: list[ActionRate]) -> dict[str, dict[str, dict[str, float]]]:
    """``{"pool/opponent": {context: {action: rate}}}``: what a checkpoint played against whom
    (``metrics.actions``), compact enough for every checkpoint's record."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in rows:
        out.setdefault(f"{r.pool}/{r.opponent}", {}).setdefault(r.context, {})[r.action] = r.rate
    return out


def plot_curve(out: Path, state: TrainerState, arm: str | None = None) -> None:
    """``curve.png``: Safety J, Pay/r, Exploit (± one standard error) per checkpoint, and the
    mean rollout reward per step; ``arm`` (``SEPOArgs.arm``) names the run in the title."""
    if not state.evals:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [e["step"] for e in state.evals]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for key in ("safety_j", "pay", "exploit", "collusion"):
        if key in state.evals[0]:
            values = [e[key]["value"] for e in state.evals]
            errors = [e[key]["stderr"] for e in state.evals]
            ax.errorbar(steps, values, yerr=errors, label=key, marker="o", capsize=3)
    if "exact_exploitability" in state.evals[0]:
        ax.plot(
            steps,
            [e["exact_exploitability"] for e in state.evals],
            marker="s",
            label="exact exploitability",
        )
    ax.set_xlabel("step")
    ax.legend()
    ax.set_title(f"SEPO checkpoints{f' ({arm} arm)' if arm else ''}, greedy evaluation")
    if state.log:
        bx.plot([e["step"] for e in state.log], [e["reward"] for e in state.log], marker=".")
        bx.set_xlabel("step")
        bx.set_title("mean rollout reward per group (shaped)")
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)
    plt.close(fig)


def plot_actions(out: Path, state: TrainerState) -> None:
    """``actions.png``: per opponent, the rate of each action (the last, alphabetically, is the
    rest) over all decisions, on the first and after each move of the opponent, per
    checkpoint."""
    records = [e for e in state.evals if e.get("actions")]
    if not records:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    opponents = sorted({o for e in records for o in e["actions"]})
    actions = sorted(
        {a for e in records for o in e["actions"].values() for c in o.values() for a in c}
    )
    contexts = sorted(
        {c for e in records for o in e["actions"].values() for c in o},
        key=lambda c: ({ALL: 0, FIRST: 1}.get(c, 2), c),
    )
    cols = min(4, len(opponents))
    rows = -(-len(opponents) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False)
    lines = [(c, a) for c in contexts for a in actions[:-1] or actions]
    colour = {line: f"C{i % 10}" for i, line in enumerate(lines)}  # one colour per line everywhere
    handles = {}
    for ax, opponent in zip(axes.flat, opponents, strict=False):
        for context, action in lines:
            points = [
                (e["step"], e["actions"][opponent][context].get(action, 0.0))
                for e in records
                if context in e["actions"].get(opponent, {})
            ]
            if points:
                label = f"{action} | {context}"
                (handles[label],) = ax.plot(
                    *zip(*points, strict=True), marker="o", color=colour[context, action]
                )
        ax.set_title(opponent, fontsize=9)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("step")
    for ax in list(axes.flat)[len(opponents) :]:
        ax.axis("off")
    fig.legend(handles.values(), handles.keys(), loc="lower right", fontsize=8)
    fig.suptitle("What each checkpoint played, per opponent (greedy evaluation)")
    fig.tight_layout()
    fig.savefig(out / "actions.png", dpi=100)
    plt.close(fig)
