"""``stratagem acceptance``: the IR acceptance curve of one bargaining agent per role, as a table,
``curves.json``, ``curves.png`` and the probe episodes' ``traces.jsonl`` (each trace's ``meta``
names its role and margin; the seat's answers are in its decisions). The command's settings and
body live here, beside the report; the CLI only registers them."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stratagem.agents.settings import AgentSettings
from stratagem.errors import ConfigError
from stratagem.metrics.acceptance import MARGINS, AcceptanceCurve
from stratagem.report.probe_folder import refuse_failed, write_probe_folder
from stratagem.settings import NonNegative, opt

console = Console()
ROLES = ("seller", "buyer")


@dataclasses.dataclass(kw_only=True)
class AcceptanceConfig(AgentSettings):
    """Probe whether a bargaining agent accepts offers beyond its reservation value."""

    params: dict[str, Any] = opt({}, "--param", "-p")
    """Bargaining parameter KEY=VALUE (JSON value); repeatable."""
    gft: NonNegative = 4
    """GFT scenarios to probe on."""
    ngft: NonNegative = 4
    """NGFT scenarios to probe on."""
    split: str = "validation"
    """Catalog split the scenarios come from: train, validation or test."""
    role: str = "both"
    """seller, buyer or both."""
    margins: list[float] = opt(list(MARGINS))
    """Offer margins beyond the reservation value, as fractions of it (negative: a gain)."""
    deadline: bool = False
    """Probe the seat's last turn (the round limit set to the probed round)."""
    seed: int = opt(0, "-s")
    """Seed of the scenarios and of every probe episode."""
    out: str | None = opt(None, "-o")
    """Folder for curves.json and curves.png (none: print only)."""


def acceptance_command(cfg: AcceptanceConfig) -> None:
    """Probe whether a bargaining agent accepts offers beyond its reservation value."""
    from stratagem.agents.spec import make_agent
    from stratagem.games.bargaining import Bargaining
    from stratagem.metrics.acceptance import acceptance_curve

    if cfg.role not in (*ROLES, "both"):
        raise ConfigError(f"--role must be seller, buyer or both, not {cfg.role!r}")
    if cfg.gft + cfg.ngft == 0:
        raise ConfigError("--gft and --ngft: probe at least one scenario")
    game = Bargaining(**{"split": cfg.split, **cfg.params})
    scenarios = game.tournament_scenarios(cfg.gft, cfg.ngft, cfg.seed)
    agent = make_agent(cfg.agent, game, cfg.llm_options(game))
    roles = ROLES if cfg.role == "both" else (cfg.role,)
    curves = []
    for role in roles:
        with console.status(f"{agent.name} as {role}: {len(scenarios) * len(cfg.margins)} probes"):
            curve = acceptance_curve(
                agent,
                game,
                scenarios,
                role,
                margins=cfg.margins,
                seed=cfg.seed,
                deadline=cfg.deadline,
            )
        refuse_failed(curve.errors, f"{agent.name} as {role}")  # never read as a refusal
        curves.append(curve)
        console.print(_table(curve))
    if cfg.out is not None:
        write_probe_folder(
            cfg.out,
            ("curves.json", [_json(c) for c in curves]),
            ("curves.png", lambda path: _plot(curves, path)),
            (t for c in curves for t in c.traces),
            console,
        )


def _table(curve: AcceptanceCurve) -> Table:
    table = Table(title=f"{curve.agent} as {curve.role}: accepts an offer beyond its value")
    for column in ("margin", "probes", "accepted", "rate ± se", "countered", "beyond its value"):
        table.add_column(column, justify="right")
    for row in curve.rows:
        table.add_row(
            f"{row.margin:+.0%}",
            str(row.decisions),
            str(row.accepted),
            _rate(row.rate, row.stderr),
            str(row.countered),
            str(row.countered_beyond),
        )
    table.caption = (
        f"accepted a loss (margin > 0) {curve.violation_rate():.2f} · accepted a gain (margin < 0)"
        f" {curve.gain_rate():.2f} · counters beyond its value {curve.counter_violation_rate():.2f}"
        f" · ended before the offer {curve.ended_early}"
    )
    return table


def _rate(rate: float, stderr: float) -> str:
    return "–" if rate != rate else f"{rate:.2f} ± {stderr:.2f}"


def _json(curve: AcceptanceCurve) -> dict:
    def number(x: float) -> float | None:  # JSON has no NaN: a rate without decisions is null
        return None if x != x else x

    rows = [dataclasses.asdict(r) for r in curve.rows]
    return {
        "agent": curve.agent,
        "role": curve.role,
        "violation_rate": number(curve.violation_rate()),
        "gain_rate": number(curve.gain_rate()),
        "counter_violation_rate": number(curve.counter_violation_rate()),
        "ended_early": curve.ended_early,
        "rows": rows,
    }


def _plot(curves: list[AcceptanceCurve], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for curve in curves:
        xs = [100 * r.margin for r in curve.rows]
        ax.errorbar(
            xs,
            [r.rate for r in curve.rows],
            [r.stderr for r in curve.rows],
            marker="o",
            capsize=3,
            label=curve.role,
        )
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set(
        xlabel="offer beyond the reservation value (% of it)", ylabel="accepted", ylim=(-0.05, 1.05)
    )
    # a stacked adapter's name runs long: wrap it at its separators rather than cut it off
    ax.set_title(textwrap.fill(curves[0].agent.replace(",", ", "), 70), fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
