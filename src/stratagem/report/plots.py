"""Plots as PNG files (matplotlib, imported lazily with a non-interactive backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def heatmap(table: pd.DataFrame, path: str | Path, title: str, cmap: str = "viridis") -> Path:
    """An annotated heatmap of ``table`` (rows × columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows, n_cols = table.shape
    fig, ax = plt.subplots(figsize=(1.1 * n_cols + 3, 0.6 * n_rows + 2))
    image = ax.imshow(table.to_numpy(dtype=float), cmap=cmap, aspect="auto")
    ax.set_xticks(range(n_cols), table.columns, rotation=45, ha="right")
    ax.set_yticks(range(n_rows), table.index)
    ax.set_xlabel(table.columns.name or "")
    ax.set_ylabel(table.index.name or "")
    values = table.to_numpy(dtype=float)
    mid = (np.nanmax(values) + np.nanmin(values)) / 2 if np.isfinite(values).any() else 0.0
    for i in range(n_rows):
        for j in range(n_cols):
            ax.text(
                j,
                i,
                "–" if np.isnan(values[i, j]) else f"{values[i, j]:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="black" if np.isnan(values[i, j]) or values[i, j] > mid else "white",
            )
    ax.set_title(title)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def radar(profiles: pd.DataFrame, path: str | Path, title: str) -> Path:
    """One polygon per row of ``profiles`` (agents) over its columns (axes, 0-100)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = list(profiles.columns)
    angles = np.linspace(0, 2 * np.pi, len(axes), endpoint=False).tolist()
    fig, ax = plt.subplots(figsize=(6.5, 6.5), subplot_kw={"polar": True})
    for agent, row in profiles.iterrows():
        values = np.nan_to_num(row.to_numpy(dtype=float), nan=0.0).clip(0, 100).tolist()
        ax.plot(angles + angles[:1], values + values[:1], label=str(agent))
        ax.fill(angles + angles[:1], values + values[:1], alpha=0.08)
    ax.set_xticks(angles, axes)
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend(loc="upper right", bbox_to_anchor=(1.3, 1.1), fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
