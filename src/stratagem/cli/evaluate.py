"""``stratagem eval``: SEPO evaluation of one agent against a game's pools."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from stratagem.agents.spec import LLMOptions, is_llm, make_agent
from stratagem.cli.config import load_config, parse_params
from stratagem.cli.progress import progress_bar
from stratagem.errors import ConfigError
from stratagem.evaluation import Evaluation, count_episodes, evaluate
from stratagem.games import get_game
from stratagem.report.tables import LABELS
from stratagem.runs import check_out_path, fresh_folder

console = Console()

# Ray settings are runtime settings: a run may resume with or without Ray. (``--ray`` is a flag
# and the address its own option: typer has no option whose value may be left out.)
RAY_OPTION = typer.Option(
    None,
    "--ray",
    help="Play on Ray: a local cluster unless --ray-address is given.",
    show_default=False,
)
RAY_ADDRESS_OPTION = typer.Option(
    None,
    "--ray-address",
    metavar="ADDRESS",
    help="Ray cluster to play on (auto, HOST:6379, ray://HOST:10001); implies --ray.",
)
WORKERS_OPTION = typer.Option(
    None, "--workers", help="Ray workers (default: one per CPU, or per GPU for hf models)."
)


def ray_target(ray: bool | None, address: str | None, workers: int | None) -> str | None:
    """Returns where to play: None (locally, without Ray), ``local`` or a cluster address.

    Raises ``ConfigError`` for ``--workers`` without Ray.
    """
    target = address or ("local" if ray else None)
    if workers is not None and target is None:
        raise ConfigError("--workers sets the number of Ray workers: add --ray")
    return target


class EvalConfig(BaseModel):
    """Every ``stratagem eval`` setting (flags override a config file's)."""

    model_config = ConfigDict(extra="forbid")

    game: str
    params: dict[str, Any] = Field(default_factory=dict, description="game parameters")
    agent: str = "hf"
    episodes: int = Field(20, gt=0, description="episodes per opponent")
    seed: int = 0
    out: str | None = None
    normalise: bool = False
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(64, gt=0)
    adapter: str | None = None
    dtype: str = "auto"
    fallback: str = Field("argmax", pattern="^(argmax|sample|none)$")
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_batch: int = Field(64, gt=0)
    concurrency: int = Field(8, gt=0)
    max_retries: int = Field(5, ge=0)
    attempt_timeout: float = Field(60.0, gt=0)
    max_error_rate: float = Field(0.0, ge=0, le=1, description="errored episodes allowed")
    new_run: bool = False
    ray: str | None = Field(None, description="'local' or a Ray cluster address (runtime only)")
    workers: int | None = Field(None, gt=0, description="Ray workers (runtime only)")

    def llm_options(self) -> LLMOptions:
        """Returns the backend and generation settings of an LLM agent."""
        return LLMOptions(**{k: getattr(self, k) for k in LLMOptions.__dataclass_fields__})


def eval_command(
    game: str = typer.Option(None, "--game", "-g", help="Game id (see `stratagem games`)."),
    param: list[str] = typer.Option(
        None, "--param", "-p", help="Game parameter KEY=VALUE (JSON value); repeatable."
    ),
    agent: str = typer.Option(
        None,
        "--agent",
        "-a",
        help="strategy:NAME, hf (embedded SmolLM2), hf:MODEL_OR_PATH, openai:MODEL, vllm [hf].",
    ),
    episodes: int = typer.Option(None, "--episodes", "-n", help="Episodes per opponent [20]."),
    seed: int = typer.Option(None, "--seed", "-s", help="Base seed [0]."),
    out: str = typer.Option(None, "--out", "-o", help="Run folder [runs/<game>/<agent>-s<seed>]."),
    normalise: bool = typer.Option(None, "--normalise/--raw", help="Scale payoffs by 3/reference."),
    temperature: float = typer.Option(None, help="Sampling temperature; 0 is greedy [0]."),
    max_new_tokens: int = typer.Option(None, help="Generated tokens per decision [64]."),
    adapter: str = typer.Option(None, help="PEFT adapter folder for an hf model."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint for openai:MODEL."),
    concurrency: int = typer.Option(None, help="Requests in flight for openai [8]."),
    max_retries: int = typer.Option(None, help="Retries per request for openai [5]."),
    attempt_timeout: float = typer.Option(None, help="Seconds per request attempt [60]."),
    max_batch: int = typer.Option(None, help="Sequences per hf generate call [64]."),
    max_error_rate: float = typer.Option(
        None, help="Errored episodes tolerated before the exit code says failure [0]."
    ),
    new_run: bool = typer.Option(
        None, "--new-run", help="Start a fresh folder, never resume.", show_default=False
    ),
    ray: bool = RAY_OPTION,
    ray_address: str = RAY_ADDRESS_OPTION,
    workers: int = WORKERS_OPTION,
    config: Path = typer.Option(None, "--config", "-c", help="YAML or TOML file of settings."),
) -> None:
    """Evaluate an agent against every pool of a game and print the SEPO metrics."""
    cfg = load_config(
        EvalConfig,
        config,
        game=game,
        params=parse_params(param),
        agent=agent,
        episodes=episodes,
        seed=seed,
        out=out,
        normalise=normalise,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        adapter=adapter,
        base_url=base_url,
        concurrency=concurrency,
        max_retries=max_retries,
        attempt_timeout=attempt_timeout,
        max_batch=max_batch,
        max_error_rate=max_error_rate,
        new_run=new_run,
        ray=ray_target(ray, ray_address, workers),
        workers=workers,
    )
    if cfg.workers is not None and cfg.ray is None:
        raise ConfigError("workers sets the number of Ray workers: set ray too")
    if not is_llm(cfg.agent):
        _refuse_llm_options(cfg)
    the_game = get_game(cfg.game, **cfg.params)
    options = cfg.llm_options()
    the_agent = make_agent(cfg.agent, the_game, options)
    extra: dict = {"agent_spec": cfg.agent}
    if is_llm(cfg.agent):
        extra["llm"] = options.fingerprint()
        extra["model_id"] = the_agent.backend.model_id  # type: ignore[attr-defined]
    folder = check_out_path(cfg.out if cfg.out is not None else default_out(cfg))
    if cfg.new_run:
        folder = fresh_folder(folder)
    total = count_episodes(the_game, cfg.episodes)
    player = None
    if cfg.ray is not None:
        from stratagem.tournament.ray import RayPlayer

        player = RayPlayer(
            {the_agent.name: cfg.agent}, options=options, address=cfg.ray, workers=cfg.workers
        )
    with progress_bar(console) as progress:
        task = progress.add_task(f"{cfg.game} · {the_agent.name}", total=total)
        result = evaluate(
            the_game,
            the_agent,
            episodes=cfg.episodes,
            seed=cfg.seed,
            normalise=cfg.normalise,
            out=folder,
            fingerprint_extra=extra,
            on_episode=lambda _: progress.advance(task),
            player=player,
        )
    print_evaluation(result)
    _exit_on_errors(result, cfg.max_error_rate)


def _refuse_llm_options(cfg: EvalConfig) -> None:
    """A strategy agent has no model: LLM options would be silently ignored, so refuse them."""
    defaults = EvalConfig(game=cfg.game)
    given = [
        k
        for k in ("temperature", "top_p", "max_new_tokens", "adapter", "base_url", "dtype")
        if getattr(cfg, k) != getattr(defaults, k)
    ]
    if given:
        names = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ConfigError(f"{names}: for LLM agents (hf, openai:MODEL, vllm) only, not {cfg.agent}")


def _exit_on_errors(result: Evaluation, max_error_rate: float) -> None:
    """A9: a run with errored episodes says so and exits 1 (beyond ``max_error_rate``)."""
    attempted = result.episodes
    if not result.errors:
        return
    complete = attempted - result.errors
    first = result.first_error or ""
    line = (
        f"coverage: {complete} of {attempted} episodes complete; {result.errors} failed "
        f"(first: {' '.join(first.split())}). Rerun the same command to retry them."
    )
    if result.errors / max(attempted, 1) > max_error_rate:
        Console(stderr=True, soft_wrap=True).print(line, highlight=False, markup=False)
        raise typer.Exit(1)
    console.print(line, highlight=False, markup=False)


def default_out(cfg: EvalConfig) -> Path:
    """Returns the default run folder: ``runs/<game>/<agent>-s<seed>-n<episodes>``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", cfg.agent)
    return Path("runs") / cfg.game / f"{slug}-s{cfg.seed}-n{cfg.episodes}"


def print_evaluation(result: Evaluation) -> None:
    """Print the metrics table (missing metrics as —) and the run folder."""
    n_ep = result.episodes or len(result.traces)
    kind = "SEPO metrics" if "safety_j" in result.metrics else "Metrics"
    table = Table(title=f"{kind} · {result.game} · {result.agent} · {n_ep} episodes")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("± stderr", justify="right")
    table.add_column("episodes", justify="right")
    for key, est in result.metrics.items():
        if est.n == 0:  # nothing measured: missing, never a 0.0 that reads as a result
            table.add_row(LABELS.get(key, key), "—", "—", "0")
        else:
            table.add_row(LABELS.get(key, key), f"{est.value:.4f}", f"{est.stderr:.4f}", str(est.n))
    if result.exact_exploitability is not None:
        table.add_row(
            LABELS["exact_exploitability"], f"{result.exact_exploitability:.6f}", "exact", "-"
        )
    console.print(table)
    console.print(
        f"payoffs normalised: {'yes' if result.normalised else 'no'}"
        + (f" · errors: {result.errors}" if result.errors else "")
    )
    if result.out is not None:
        console.print(f"run folder: {result.out}")
