"""``stratagem acceptance``: the IR acceptance curve of one bargaining agent per role, as a table,
``curves.json``, ``curves.png`` and the probe episodes' ``traces.jsonl`` (each trace's ``meta``
names its role and margin; the seat's answers are in its decisions)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Console

from stratagem.agents.settings import AgentSettings
from stratagem.errors import ConfigError
from stratagem.evaluation.acceptance import MARGINS
from stratagem.settings import NonNegative, opt

console = Console()
ROLES = ("seller", "buyer")


@dataclasses.dataclass(kw_only=True)
class AcceptanceConfig(AgentSettings):
    """Probe whether a bargaining agent accepts a loss.

    Offers at margins beyond the agent's reservation value, per role: the individual-rationality
    acceptance curve."""

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
    """Probe whether a bargaining agent accepts a loss."""
    from stratagem.agents.spec import make_agent
    from stratagem.evaluation.acceptance import acceptance_curve
    from stratagem.games.bargaining import Bargaining
    from stratagem.report.acceptance import acceptance_table, curve_json, plot_curves
    from stratagem.report.probe_folder import refuse_failed, write_probe_folder

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
        console.print(acceptance_table(curve))
    if cfg.out is not None:
        write_probe_folder(
            cfg.out,
            ("curves.json", [curve_json(c) for c in curves]),
            ("curves.png", lambda path: plot_curves(curves, path)),
            (t for c in curves for t in c.traces),
            console,
        )
