"""``stratagem gen-sft``: SFT datasets from rule-based demonstrators."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from stratagem.cli.progress import progress_bar
from stratagem.errors import ConfigError, UnknownNameError
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
    with progress_bar(console) as progress:
        for name in names:
            task = progress.add_task(name, total=sum(DATASETS[name].values()))
            card = write_dataset(name, out, seed, on_example=lambda t=task: progress.advance(t))
            console.print(
                f"{name}: {card['examples']['train']} train + "
                f"{card['examples']['test']} test examples → {out / name} "
                f"(assistant median {card['assistant_chars']['median']} chars)"
            )


train_app = typer.Typer(help="Train a model: sft (LoRA with TRL).", no_args_is_help=True)


@train_app.command("sft")
def sft_command(
    data: Path = typer.Option(Path("data/sft/kuhn"), help="A gen-sft dataset folder."),
    model: str = typer.Option("embedded", help="embedded, a Hugging Face id or a local folder."),
    out: Path = typer.Option(Path("runs/sft"), "--out", "-o"),
    learning_rate: float = typer.Option(2e-5, help="Paper: 2e-5; the CPU demo uses 2e-4."),
    epochs: float = typer.Option(3.0),
    max_steps: int = typer.Option(-1, help="Step budget (-1: run the epochs)."),
    batch_size: int = typer.Option(8),
    grad_accum: int = typer.Option(1),
    eval_steps: int = typer.Option(50),
    save_steps: int = typer.Option(50),
    bf16: bool = typer.Option(False, help="bf16 weights (GPU)."),
    merge: bool = typer.Option(False, help="Also save the merged model."),
) -> None:
    """LoRA SFT (rank 32, α 64, attention projections) with TRL; resumes from checkpoints."""
    from stratagem.training.sft import SFTArgs, train_sft

    if not (data / "train.jsonl").exists():
        raise ConfigError(f"{data} holds no train.jsonl; write one with `stratagem gen-sft`")
    adapter = train_sft(
        SFTArgs(
            model=model,
            data=data,
            out=out,
            learning_rate=learning_rate,
            epochs=epochs,
            max_steps=max_steps,
            batch_size=batch_size,
            grad_accum=grad_accum,
            eval_steps=eval_steps,
            save_steps=save_steps,
            bf16=bf16,
            merge=merge,
        )
    )
    console.print(
        f"adapter: {adapter} (evaluate with: stratagem eval --game kuhn --agent hf "
        f"--adapter {adapter})"
    )
