"""What the solver commands write and print: per-scenario metrics, Table 1 of seed 003, the
tree-cost and per-scenario tables, steering and judge accuracy, the PSRO meta-game and the
imitation meta-game table."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def write_metrics_csv(folder: Path, results) -> None:
    """Writes ``metrics.csv``: CFR Gain per player, NashConv and the any/any and CFR/CFR values
    per scenario."""
    lines = ["scenario,cfr_gain_0,cfr_gain_1,cfr_gain,nash_conv,any_0,any_1,cfr_0,cfr_1"]
    for r in results:
        lines.append(
            f"{r.scenario},{r.cfr_gain[0]!r},{r.cfr_gain[1]!r},{r.mean_gain!r},{r.nash_conv!r},"
            f"{r.value_any[0]!r},{r.value_any[1]!r},{r.value_cfr[0]!r},{r.value_cfr[1]!r}"
        )
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")


def table_md(cfg: Any, model: str, stats, summary, results) -> str:
    """Returns seed 003 Table 1's row for this run (tree costs, CFR Gain, NashConv) in Markdown."""
    head = (
        "| domain | model | scenarios | replies × seeds × instructions | nodes | messages | "
        "model calls | cache hits | seconds | CFR Gain | NashConv |\n"
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    gain = str(summary["cfr_gain"]) if summary else "—"
    conv = str(summary["nash_conv"]) if summary else "—"
    n_instr = len(cfg.instructions) if cfg.instructions else "default"
    return head + (
        f"| {cfg.game} | {model} | {len(results)} | {cfg.replies} × {cfg.seeds} × {n_instr} | "
        f"{stats.nodes} | {stats.messages} | {stats.model_calls} | {stats.cache_hits} | "
        f"{stats.seconds:.1f} | {gain} | {conv} |\n"
    )


def print_dialogue_tables(console: Console, cfg: Any, stats, results, summary, failed) -> None:
    """Prints the tree-cost table, the per-scenario CFR table and the unsolved scenarios."""
    table = Table(title=f"{cfg.game}: trees")
    for column in ("nodes", "infosets", "messages", "model calls", "generated", "cache hits"):
        table.add_column(column, justify="right")
    table.add_column("structured lines", justify="right")
    table.add_column("judge ok / fallback / failed", justify="right")
    table.add_column("seconds", justify="right")
    table.add_row(
        str(stats.nodes),
        str(stats.infosets),
        str(stats.messages),
        str(stats.model_calls),
        str(stats.generated),
        str(stats.cache_hits),
        f"{stats.structured}/{stats.messages}",
        f"{stats.judged} / {stats.judge_fallbacks} / {stats.judge_failures}",
        f"{stats.seconds:.1f}",
    )
    console.print(table)
    table = Table(title=f"{cfg.game}: {cfg.algorithm} × {cfg.iterations} per scenario")
    for column in ("scenario", "CFR Gain 0", "CFR Gain 1", "NashConv", "any/any", "CFR/CFR"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r.scenario,
            f"{r.cfr_gain[0]:+.3f}",
            f"{r.cfr_gain[1]:+.3f}",
            f"{r.nash_conv:.2e}",
            f"{r.value_any[0]:.2f} / {r.value_any[1]:.2f}",
            f"{r.value_cfr[0]:.2f} / {r.value_cfr[1]:.2f}",
        )
    console.print(table)
    if summary:
        console.print(
            f"CFR Gain {summary['cfr_gain']} · NashConv {summary['nash_conv']} "
            f"(mean ± std over {summary['cfr_gain'].n} scenarios)"
        )
    if failed:
        console.print(f"not solved (a judge answer did not parse): {', '.join(failed)}")


def write_steering(console: Console, cfg: Any, domain, trees, backend, folder: Path) -> None:
    """Classifies up to ``cfg.steering`` messages per instruction; writes and prints
    ``steering.md`` / ``steering.json``."""
    from stratagem.solvers.dialogue.metrics import steering_accuracy, steering_samples

    report = steering_accuracy(domain, steering_samples(trees, cfg.steering), backend)
    rows = report.rows()
    exact = report.exact is not None
    lines = [
        f"Steering accuracy, {cfg.game} ({backend.model_id}); chance {report.chance:.3f}; "
        f"{report.fallbacks} answers read by the constrained fallback\n",
        "| instruction | classifier accuracy | n |" + (" structured line |" if exact else ""),
        "| --- | ---: | ---: |" + (" ---: |" if exact else ""),
    ]
    for r in rows:
        cell = f" {r['exact']:.3f} |" if exact and r.get("exact") is not None else ""
        lines.append(f"| {r['instruction']} | {r['accuracy']:.3f} | {r['n']} |" + cell)
    (folder / "steering.md").write_text("\n".join(lines) + "\n")
    (folder / "steering.json").write_text(json.dumps(rows, indent=2) + "\n")
    console.print("\n".join(lines))


def write_judge(console: Console, cfg: Any, domain, backend, folder: Path) -> None:
    """Judges ``cfg.judge`` templated dialogues per outcome type against their exact payoffs;
    writes and prints ``judge.md`` / ``judge.json`` (domains without exact payoffs: skipped)."""
    from stratagem.solvers.dialogue.metrics import judge_accuracy

    if not domain.structured:
        console.print(f"judge accuracy: {cfg.game} has no exact payoff to compare with; skipped")
        return
    rows = judge_accuracy(domain, backend, per_outcome=cfg.judge, seed=cfg.seed)
    lines = [
        f"Judge accuracy, {cfg.game} ({backend.model_id}); {cfg.judge} dialogues per type, "
        "2 answers each\n",
        "| outcome | Norm | Sgn | answers scored | no number |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {r.outcome} | {r.norm:.3f} | {r.sgn:.3f} | {r.n} | {r.failures} |" for r in rows]
    (folder / "judge.md").write_text("\n".join(lines) + "\n")
    (folder / "judge.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    console.print("\n".join(lines))


def write_meta_game(result, path: Path) -> None:
    """The final meta-game as CSV: one line per (seat-0, seat-1) strategy pair."""
    rows, cols = result.populations
    lines = ["seat0,seat1,payoff0,payoff1"]
    for i, a in enumerate(rows):
        for j, b in enumerate(cols):
            lines.append(f"{a},{b},{result.row_payoffs[i][j]!r},{result.col_payoffs[i][j]!r}")
    path.write_text("\n".join(lines) + "\n")


def imitation_table(cfg: Any, report, oracle, examples: int, loss: float) -> str:
    """Returns the steered-vs-unsteered 2×2 meta-game of an imitation run, in Markdown."""
    (ss, su), (us, uu) = report.row
    (css, csu), (cus, cuu) = report.col
    return (
        f"Imitation on {cfg.game}: {cfg.train} training / {cfg.test} held-out scenarios, "
        f"{examples} examples, final loss {loss:.3f}\n\n"
        "| seat 0 \\ seat 1 | steered | unsteered |\n| --- | --- | --- |\n"
        f"| steered | {ss:.2f}, {css:.2f} | {su:.2f}, {csu:.2f} |\n"
        f"| unsteered | {us:.2f}, {cus:.2f} | {uu:.2f}, {cuu:.2f} |\n\n"
        f"CCE mass on the steered LLM: seat 0 {report.steered_mass[0]:.2f}, seat 1 "
        f"{report.steered_mass[1]:.2f} (with CFR solved on the held-out trees themselves: "
        f"{oracle.steered_mass[0]:.2f}, {oracle.steered_mass[1]:.2f})\n"
    )


def write_live(console: Console, folder: Path, cfg: Any, dialogues, meta, usage, steer) -> str:
    """Writes a live steered run (``stratagem dialogue``): ``dialogues.jsonl``, ``summary.json``
    and, when every dialogue has a payoff, ``meta_game.json`` and ``table.md`` (printed);
    returns the table ("" without a meta-game)."""
    with (folder / "dialogues.jsonl").open("w") as f:
        f.writelines(json.dumps(d.row()) + "\n" for d in dialogues)
    calls = {k: v for k, v in asdict(usage).items() if k != "batches"}
    summary = {"game": cfg.game, "steer": cfg.steer, "instructions": list(steer.instructions)}
    summary |= {"scenarios": cfg.scenarios, "games": cfg.games, "dialogues": len(dialogues)}
    summary |= {"off_tree_turns": getattr(steer, "off_tree", 0), "usage": calls}
    summary["steered_mass"] = list(meta.steered_mass) if meta else None
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if meta is None:
        return ""
    (folder / "meta_game.json").write_text(json.dumps(asdict(meta), indent=2) + "\n")
    (ss, su), (us, uu) = meta.row
    (css, csu), (cus, cuu) = meta.col
    same = len({ss, su, us, uu}) == 1 and len({css, csu, cus, cuu}) == 1
    flat = " (every cell pays the same: the mass only breaks a tie)" if same else ""
    table = (
        f"Live {cfg.game} dialogues steered by {meta.steer}: {meta.scenarios} scenarios × "
        f"{meta.games} games per cell, {cfg.replies} replies, {cfg.seeds} LLM seeds; mean "
        f"payoffs (seat 0, seat 1)\n\n"
        "| seat 0 \\ seat 1 | steered | unsteered |\n| --- | --- | --- |\n"
        f"| steered | {ss:.2f}, {css:.2f} | {su:.2f}, {csu:.2f} |\n"
        f"| unsteered | {us:.2f}, {cus:.2f} | {uu:.2f}, {cuu:.2f} |\n\n"
        f"CCE mass on the steered LLM: seat 0 {meta.steered_mass[0]:.2f}, seat 1 "
        f"{meta.steered_mass[1]:.2f}{flat}; model calls {usage.calls}, cache hits {usage.hits}\n"
    )
    (folder / "table.md").write_text(table)
    console.print(table)
    return table
