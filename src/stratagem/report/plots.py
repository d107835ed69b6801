"""Plots as PNG files (matplotlib, imported lazily with a non-interactive backend)."""

from __future__ import annotations

from pathlib import Path

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
    mid = (values.max() + values.min()) / 2
    for i in range(n_rows):
        for j in range(n_cols):
            ax.text(
                j,
                i,
                f"{values[i, j]:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="black" if values[i, j] > mid else "white",
            )
    ax.set_title(title)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
