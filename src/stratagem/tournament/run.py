"""The local round robin: payoff matrices of rule-based strategies, and resumable round robins
of any agents in both seats (bargaining: buyer and seller) with tables and plots."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stratagem.agent import Agent
from stratagem.episode import EpisodeSpec
from stratagem.errors import IncompleteRunError
from stratagem.game import Game
from stratagem.play import play
from stratagem.runs import TRACES, Player, RunFolder
from stratagem.seeding import derive
from stratagem.strategies import get_strategy, strategies
from stratagem.trace import Trace, iter_traces

if TYPE_CHECKING:
    import pandas as pd

SHOWN_PAIRINGS = 5  # failing pairings a coverage line names
ROW_COLUMNS = ["episode_id", "agent", "opponent", "seat", "payoff_per_round"]


def digest(items: Sequence[Any]) -> str:
    """Returns the sha256 of a list of scenarios (dataclasses or plain JSON values)."""
    import dataclasses

    data = [
        dataclasses.asdict(x) if dataclasses.is_dataclass(x) and not isinstance(x, type) else x
        for x in items
    ]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def payoff_matrix(
    game: Game, names: Sequence[str] | None = None, *, episodes: int = 20, seed: int = 0
) -> pd.DataFrame:
    """Mean per-round payoff of the row strategy (seat 0) against the column strategy (seat 1)."""
    import pandas as pd

    names = list(names or strategies(game.name).names())
    agents = {n: get_strategy(game.name, n) for n in names}

    def specs():
        for row in names:
            for col in names:
                # self-play needs two instances so each seat gets its own batch entry
                opponent = agents[col] if col != row else get_strategy(game.name, col)
                for i in range(episodes):
                    yield EpisodeSpec(
                        f"{row}/{col}/{i:04d}",
                        derive(seed, "matrix", game.name, i),
                        (agents[row], opponent),
                        {"row": row, "col": col},
                    )

    sums: dict[tuple[str, str], list[float]] = {}
    for trace in play(game, specs()):
        per_round = trace.totals()[0] / max(len(trace.rounds), 1)
        sums.setdefault((trace.meta["row"], trace.meta["col"]), []).append(per_round)
    table = pd.DataFrame(index=names, columns=names, dtype=float)
    for (row, col), xs in sums.items():
        table.loc[row, col] = sum(xs) / len(xs)
    table.index.name = "row (seat 0)"
    table.columns.name = "column (seat 1)"
    return table


@dataclass
class TournamentResult:
    """A finished (or resumed) round robin: its folder, counts, summary table and files.

    ``episodes`` counts the complete episodes in the folder, ``errors`` those that failed in
    this call (a rerun retries them), ``failed`` the failures by pairing (``"A vs B"``, seat 0
    first) and ``first_error`` the first one's reason.
    """

    out: Path
    episodes: int
    errors: int
    summary: pd.DataFrame
    files: list[Path] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    first_error: str | None = None

    def coverage(self) -> str:
        """One line: episodes complete and failed, the failing pairings (at most
        ``SHOWN_PAIRINGS``) and the first failure's reason."""
        attempted = self.episodes + self.errors
        line = f"coverage: {self.episodes} of {attempted} episodes complete"
        if not self.errors:
            return line
        pairs = sorted(self.failed.items(), key=lambda kv: (-kv[1], kv[0]))
        named = ", ".join(f"{p} ({n})" for p, n in pairs[:SHOWN_PAIRINGS])
        more = f" and {len(pairs) - SHOWN_PAIRINGS} more" if len(pairs) > SHOWN_PAIRINGS else ""
        first = " ".join((self.first_error or "").split())[:200]
        return (
            f"{line}; {self.errors} failed, in {named}{more} (first: {first}). Rerun the same "
            "command to retry them."
        )

    def check(self) -> None:
        """Raise ``IncompleteRunError`` (exit 1, the ``coverage`` line) when episodes failed."""
        if self.errors:
            raise IncompleteRunError(self.coverage())


def round_robin_specs(
    agents: dict[str, Agent], *, count: int, seed: int, scenarios: Sequence[Any] | None = None
) -> Iterator[EpisodeSpec]:
    """Every agent against every agent in both seats, itself included, on the same episodes.

    Episode ids are (seat-0 agent, seat-1 agent, index); the i-th episode of every pairing plays
    the same scenario with the same seed.
    """
    for first in agents:
        for second in agents:
            for i in range(count):
                yield EpisodeSpec(
                    episode_id=f"{first}|{second}|{i:05d}",
                    seed=derive(seed, "tournament", i),
                    agents=(agents[first], agents[second]),
                    meta={"seat0": first, "seat1": second, "index": i},
                    scenario=None if scenarios is None else scenarios[i],
                )


def round_robin(
    game: Game,
    agents: dict[str, Agent],
    out: str | Path,
    *,
    count: int,
    seed: int = 42,
    scenarios: Sequence[Any] | None = None,
    fingerprint_extra: dict | None = None,
    max_live: int = 256,
    on_episode: Callable[[Trace], None] | None = None,
    player: Player | None = None,
) -> TournamentResult:
    """Run (or resume) a round robin into the run folder ``out`` and write its tables and plots.

    Traces stream to disk as episodes finish and are never all held in memory; the tables are
    built afterwards from the trace file alone. ``player`` plays the episodes in place of the
    local ``play`` (``tournament.ray.RayPlayer``: on Ray); the result is the same.
    """
    from stratagem.evaluation.pools import run_status, runtime

    failed: dict[str, int] = {}
    first_error: list[str] = []

    def finished(trace: Trace) -> None:
        if trace.status != "complete":  # tallied as it happens: the file keeps old failures too
            pairing = f"{trace.meta.get('seat0', trace.agents[0])} vs "
            pairing += str(trace.meta.get("seat1", trace.agents[1]))
            failed[pairing] = failed.get(pairing, 0) + 1
            first_error[:] = first_error or [trace.error or trace.status]
        if on_episode is not None:
            on_episode(trace)

    fingerprint = {
        "job": "tournament",
        "game": game.name,
        "game_version": game.version,
        "game_params": dict(game.params),
        "agents": list(agents),
        "count": count,
        "seed": seed,
        "scenarios": None if scenarios is None else digest(scenarios),
        **(fingerprint_extra or {}),
    }
    with RunFolder(out, fingerprint, runtime=runtime(max_live, player)) as run:
        specs = round_robin_specs(agents, count=count, seed=seed, scenarios=scenarios)
        errors = run.play(game, specs, max_live=max_live, on_episode=finished, player=player)
        result = write_tournament_report(game, run.path)
        result.errors, result.failed = errors, failed
        result.first_error = first_error[0] if first_error else None
        status = run_status(result.episodes + errors, errors)
        run.finish(status, episodes=result.episodes, errors=errors)
    return result


def write_tournament_report(game: Game, folder: Path) -> TournamentResult:
    """Tables (CSV, Parquet, Markdown) and plots of a tournament folder, from its traces.

    A game with a report in ``report.registry`` writes its own (bargaining: per role and
    regime; dond: agreement, Pareto rate and length per pairing); any other gets mean payoff per
    round by agent and seat, and a seat-0 heatmap.
    """
    import pandas as pd

    from stratagem.report.plots import heatmap
    from stratagem.report.registry import tournament_report
    from stratagem.report.tables import write_frame

    traces = iter_traces(folder / TRACES)
    report = tournament_report(game.name)
    if report is not None:
        summary, written = report.write(traces, folder)
        episodes = sum(1 for t in iter_traces(folder / TRACES) if t.status == "complete")
        return TournamentResult(folder, episodes, 0, summary, list(written))
    files: list[Path] = []
    rows = _canonical(pd.DataFrame(_seat_rows(traces), columns=ROW_COLUMNS))
    summary = (
        rows.groupby(["agent", "seat"])["payoff_per_round"]
        .agg(["mean", "sem", "count"])
        .reset_index()
    )
    files += write_frame(summary, folder / "summary", "Mean payoff per round by agent × seat")
    table = rows[rows.seat == 0].pivot_table(
        index="agent", columns="opponent", values="payoff_per_round", aggfunc="mean"
    )
    table.index.name, table.columns.name = "seat 0", "seat 1"
    if len(table):  # a tournament whose every episode failed has no payoffs to draw
        title = f"{game.name}: seat-0 payoff per round"
        files.append(heatmap(table, folder / "heatmap_payoff.png", title))
    return TournamentResult(folder, len(rows) // 2, 0, summary, files)


def _canonical(rows: pd.DataFrame) -> pd.DataFrame:  # noqa: F821 (pandas is loaded lazily)
    """Rows in episode-id order, so a resumed run (appended in another order) sums in the same
    order and gives the same tables to the last bit."""
    keys = [k for k in ("episode_id", "role", "seat") if k in rows]
    return rows.sort_values(keys, kind="stable").reset_index(drop=True) if len(rows) else rows


def _seat_rows(traces: Iterable[Trace]) -> Iterator[dict]:
    for t in traces:
        if t.status != "complete":
            continue
        for seat in (0, 1):
            total = sum(r.payoffs[seat] for r in t.rounds)
            yield {
                "episode_id": t.episode_id,  # the order aggregates sum in (``_canonical``)
                "agent": t.agents[seat],
                "opponent": t.agents[1 - seat],
                "seat": seat,
                "payoff_per_round": total / max(len(t.rounds), 1),
            }
