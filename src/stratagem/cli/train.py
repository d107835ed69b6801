"""``stratagem gen-sft``: SFT datasets from rule-based demonstrators."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stratagem.errors import UnknownNameError
from stratagem.training.sft_data import DATASETS, write_dataset

console = Console()


def gen_sft_command(
    out: Path = typer.Option(Path("data/sft"), "--out", "-o", help="Output folder."),
    datasets: str = typer.Option(
        ",".join(DATASETS), help="Comma-separated: multi, kuhn, multi_issue."
    ),
    seed: int = typer.Option(42, "--seed", "-s"),
) -> None:
    """Write SFT datasets (App. H sizes, 80/20 split, chat `messages` JSONL + dataset card)."""
    names = [d.strip() for d in datasets.split(",") if d.strip()]
    for name in names:
        if name not in DATASETS:
            raise UnknownNameError("SFT dataset", name, DATASETS)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        for name in names:
            task = progress.add_task(name, total=sum(DATASETS[name].values()))
            card = write_dataset(name, out, seed, on_example=lambda t=task: progress.advance(t))
            console.print(
                f"{name}: {card['examples']['train']} train + "
                f"{card['examples']['test']} test examples → {out / name} "
                f"(assistant median {card['assistant_chars']['median']} chars)"
            )
