"""Plots of solver and imitation runs: exploitability curves, CFR Gain and NashConv per
scenario, an imitation loss curve."""

from __future__ import annotations

from pathlib import Path


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


def plot_metrics(results, path: Path, title: str) -> Path:
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


def plot_curves(curves: dict, path: Path, title: str) -> Path:
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


def plot_loss(losses: list[float], path: Path, title: str) -> Path:
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
