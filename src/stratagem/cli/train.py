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
    from stratagem.runs import check_out_path

    check_out_path(out)
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


train_app = typer.Typer(
    help="Train a model: sft (LoRA with TRL), sepo (SEPO-GRPO).", no_args_is_help=True
)


@train_app.command("sft")
def sft_command(
    data: Path = typer.Option(Path("data/sft/kuhn"), help="A gen-sft dataset folder."),
    model: str = typer.Option("embedded", help="embedded, a Hugging Face id or a local folder."),
    games: str = typer.Option("", help="Only these games' rows, comma-separated (e.g. ipd)."),
    out: Path = typer.Option(Path("runs/sft"), "--out", "-o"),
    learning_rate: float = typer.Option(2e-5, help="Paper: 2e-5; the CPU demo uses 2e-4."),
    epochs: float = typer.Option(3.0),
    max_steps: int = typer.Option(-1, help="Step budget (-1: run the epochs)."),
    batch_size: int = typer.Option(8),
    grad_accum: int = typer.Option(1),
    eval_steps: int = typer.Option(50),
    save_steps: int = typer.Option(50),
    save_total_limit: int = typer.Option(None, help="Keep only this many checkpoints."),
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
            games=tuple(g.strip() for g in games.split(",") if g.strip()),
            out=out,
            learning_rate=learning_rate,
            epochs=epochs,
            max_steps=max_steps,
            batch_size=batch_size,
            grad_accum=grad_accum,
            eval_steps=eval_steps,
            save_steps=save_steps,
            save_total_limit=save_total_limit,
            bf16=bf16,
            merge=merge,
        )
    )
    console.print(
        f"adapter: {adapter} (evaluate with: stratagem eval --game "
        f"{games.split(',')[0] if games else data.name} --agent hf "
        f"--adapter {adapter})"
    )


@train_app.command("sepo")
def sepo_command(
    game: str = typer.Option("kuhn", "--game", "-g"),
    model: str = typer.Option("embedded", help="embedded, a Hugging Face id or a local folder."),
    adapter: str = typer.Option(None, help="Start from this LoRA adapter (an SFT run)."),
    out: Path = typer.Option(Path("runs/sepo"), "--out", "-o"),
    steps: int = typer.Option(100),
    rollouts: int = typer.Option(4, help="Rollouts per opponent (one group, one seed)."),
    credit: str = typer.Option("return", help="return (reward-to-go), immediate; both: ablation."),
    normalisation: str = typer.Option("round", help="round, episode, or both: ablation."),
    penalty: str = typer.Option(
        "own_episodes", help="own_episodes, per_rollout, shared; several (a,b): ablation."
    ),
    learning_rate: float = typer.Option(None, help="Default 1e-5; Kuhn 3e-6."),
    kl: float = typer.Option(None, help="β of the one-sided KL; default 0.01, Kuhn 0.2."),
    temperature: float = typer.Option(0.8),
    max_new_tokens: int = typer.Option(256),
    checkpoint_every: int = typer.Option(10),
    save_total_limit: int = typer.Option(
        None, help="Keep only this many checkpoints (the newest, and always the best)."
    ),
    eval_episodes: int = typer.Option(20, help="Episodes per opponent at each checkpoint."),
    seed: int = typer.Option(42),
) -> None:
    """SEPO-GRPO; resumes from the newest complete checkpoint. Comma-separated values of one of
    --penalty, --normalisation or --credit run an ablation: one arm per value in OUT/<name>-<value>,
    compared in OUT/ablation.md, .csv and .png."""
    from stratagem.training.ablation import AXES, last_checkpoint_markdown, run_ablation
    from stratagem.training.sepo import SEPOArgs, train_sepo

    _check_sepo_options(
        game, adapter, steps, rollouts, max_new_tokens, checkpoint_every, eval_episodes
    )
    given = {"credit": credit, "normalisation": normalisation, "penalty": penalty}
    values = {
        name: [v.strip() for v in text.split(",") if v.strip()] for name, text in given.items()
    }
    for name, chosen in values.items():
        for value in chosen:
            if value not in AXES[name]:
                raise UnknownNameError(name, value, AXES[name])
    varied = [name for name, chosen in values.items() if len(chosen) > 1]
    if len(varied) > 1:
        raise ConfigError(f"ablate one setting at a time, not {' and '.join(varied)}")
    args = SEPOArgs(
        game=game,
        model=model,
        adapter=adapter,
        out=out,
        steps=steps,
        rollouts=rollouts,
        credit=values["credit"][0],  # type: ignore[arg-type]
        normalisation=values["normalisation"][0],  # type: ignore[arg-type]
        penalty=values["penalty"][0],  # type: ignore[arg-type]
        learning_rate=learning_rate,
        kl=kl,  # type: ignore[arg-type]
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        checkpoint_every=checkpoint_every,
        save_total_limit=save_total_limit,
        eval_episodes=eval_episodes,
        seed=seed,
    )
    if varied:
        axis = varied[0]
        table = run_ablation(
            args, axis, values[axis], log=lambda line: console.print(line, highlight=False)
        )
        console.print(last_checkpoint_markdown(axis, table), highlight=False)
        console.print(f"ablation.md, ablation.csv and ablation.png in {out}")
        return
    folder = train_sepo(args, log=lambda line: console.print(line, highlight=False))
    console.print(f"checkpoints, best.json and curve.png in {folder}")
    best = folder / "best.json"
    if best.exists():
        import json

        chosen = json.loads(best.read_text())
        stack = ",".join([*filter(None, [chosen.get("below")]), str(folder / chosen["adapter"])])
        console.print(
            f"best by Safety J: step {chosen['step']} (evaluate with: stratagem eval --game "
            f"{game} --agent hf --adapter {stack})"
        )


def _check_sepo_options(
    game: str,
    adapter: str | None,
    steps: int,
    rollouts: int,
    max_new_tokens: int,
    checkpoint_every: int,
    eval_episodes: int,
) -> None:
    """Refuse, before any model loads, what SEPO cannot train or would silently misread."""
    from stratagem.games import GAMES, get_game
    from stratagem.metrics.sepo import SEPOGame

    if not isinstance(get_game(game), SEPOGame):
        sepo_games = [n for n in GAMES if isinstance(get_game(n), SEPOGame)]
        raise ConfigError(f"SEPO trains only the SEPO games ({', '.join(sepo_games)}), not {game}")
    for name, value, least in (
        ("--steps", steps, 0),
        ("--rollouts", rollouts, 1),
        ("--max-new-tokens", max_new_tokens, 1),
        ("--checkpoint-every", checkpoint_every, 1),
        ("--eval-episodes", eval_episodes, 0),
    ):
        if value < least:
            raise ConfigError(f"{name} must be at least {least}, got {value}")
    for folder in (adapter or "").split(","):
        if folder and not Path(folder).is_dir():
            raise ConfigError(f"--adapter {folder}: no such adapter folder")
