"""``python -m experiments.claim_probe --agent SPEC``: what a Deal or No Deal agent answers to
opening claims, beside the drills' rule (``probe.py``), as a table per rule, ``probes.json``,
``probes.png`` and the probe episodes' ``traces.jsonl`` (each trace's ``meta`` names the rule's
answer and share)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

from rich.console import Console
from rich.table import Table

from experiments.claim_probe.probe import ANSWERS, KINDS, ClaimProbe, summary_rows
from experiments.command import run_command
from stratagem.agents.settings import AgentSettings
from stratagem.errors import ConfigError
from stratagem.report.probe_folder import refuse_failed, write_probe_folder
from stratagem.settings import NonNegative, opt

console = Console()


@dataclasses.dataclass(kw_only=True)
class ClaimProbeConfig(AgentSettings):
    """Probe how a Deal or No Deal agent answers opening claims, beside the drills' rule."""

    kind: str = "both"
    """refuse (λ = 0: refuse a claim that takes every unit of the best item), joint (λ = 1:
    deal only on a joint-best claim) or both."""
    probes: NonNegative = 48
    """Claims to answer per rule."""
    seed: int = opt(42, "-s")
    """Seed of the held-out contexts (train selfplay's with the same seed, 42 by default) and of
    the claims."""
    out: str | None = opt(None, "-o")
    """Folder for probes.json, probes.png and traces.jsonl (none: print only)."""


def claim_probe_command(cfg: ClaimProbeConfig) -> None:
    """Probe how a Deal or No Deal agent answers opening claims, beside the drills' rule."""
    from experiments.claim_probe.probe import claim_probe
    from stratagem.agents.spec import make_agent
    from stratagem.games import get_game

    if cfg.kind not in (*KINDS, "both"):
        raise ConfigError(f"--kind must be {', '.join(KINDS)} or both, not {cfg.kind!r}")
    if cfg.probes < 1:
        raise ConfigError("--probes: probe at least one claim")
    game = get_game("dond")
    agent = make_agent(cfg.agent, game, cfg.llm_options(game))
    kinds = tuple(KINDS) if cfg.kind == "both" else (cfg.kind,)
    probes = []
    for kind in kinds:
        with console.status(f"{agent.name}: {cfg.probes} claims under the {kind} rule"):
            probe = claim_probe(agent, kind, cfg.probes, seed=cfg.seed)
        refuse_failed(probe.errors, f"{agent.name} ({kind})")
        probes.append(probe)
        console.print(_table(probe))
    if cfg.out is not None:
        write_probe_folder(
            cfg.out,
            ("probes.json", summary_rows(probes)),
            ("probes.png", lambda path: _plot(probes, path)),
            (t for p in probes for t in p.traces),
            console,
        )


def _table(probe: ClaimProbe) -> Table:
    table = Table(title=f"{probe.agent}: answers to opening claims under the {probe.kind} rule")
    table.add_column("the rule")
    for answer in ANSWERS:
        table.add_column(answer, justify="right")
    for rule, counts in probe.counts().items():
        table.add_row(f"{rule}s", *(str(counts[a]) for a in ANSWERS))
    rate, se = probe.agreement()
    as_rule, rule_counters = probe.counters_as_rule()
    best, kept = probe.joint_best()
    caption = (
        f"decides as the rule {rate:.2f} ± {se:.2f} · counter-claims keeping the rule's share "
        f"{as_rule} of {rule_counters} · kept shares joint-best {best} of {kept} (by chance "
        f"{probe.chance():.2f}) · "
        f"corrections {sum(a.corrections for a in probe.answers)} · writes the rule's check "
        f"exactly {sum(a.checked for a in probe.answers)}"
    )
    steps = probe.steps()
    if steps.copied[1]:  # a check was written: where it goes wrong
        named_steps = (
            ("copied", steps.copied),
            ("compared", steps.compared),
            ("followed", steps.followed),
        )
        caption += " · check steps right: " + ", ".join(
            f"{name} {k} of {n}" for name, (k, n) in named_steps
        )
    if steps.named[1]:  # a refusal check: which part of the copy goes wrong
        caption += (
            f" (of the copy: best item named {steps.named[0]}, its value {steps.valued[0]}, "
            f"units left of it {steps.counted[0]})"
        )
    table.caption = caption
    return table


def _plot(probes: list[ClaimProbe], path: Path) -> None:
    """One bar group per rule and its answer (deal / counter-claim): the probed answers stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    labels = [f"{p.kind}: rule {rule}s" for p in probes for rule in ("deal", "counter")]
    bottoms = [0] * len(labels)
    for answer in ANSWERS:
        heights = [p.counts()[rule][answer] for p in probes for rule in ("deal", "counter")]
        ax.bar(labels, heights, bottom=bottoms, label=answer)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set(ylabel="probes")
    ax.legend(title="the agent answers", fontsize=8)
    ax.set_title(textwrap.fill(probes[0].agent.replace(",", ", "), 70), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    run_command("claim-probe", ClaimProbeConfig, claim_probe_command)
