"""A tournament of a game without its own report prints a titled table: every agent's payoff per
round in each seat with its standard error and episodes; one episode shows no error (—)."""

from __future__ import annotations

import pandas as pd
from rich.console import Console

from stratagem.report.tournament import payoff_table


def _render(summary: pd.DataFrame) -> str:
    console = Console(width=80, record=True)
    console.print(payoff_table("ipd", summary))
    return console.export_text()


def test_the_generic_summary_is_a_titled_table_with_whole_numbers():
    summary = pd.DataFrame(
        {
            "agent": ["AlwaysDefect", "TitForTat"],
            "seat": [0, 1],
            "mean": [1.8333333, 2.2916667],
            "sem": [0.3004626, float("nan")],
            "count": [9, 1],
        }
    )
    text = _render(summary)
    assert "ipd round robin: mean payoff per round, by agent and seat" in text
    assert "│ AlwaysDefect │    0 │           1.8333 ± 0.3005 │        9 │" in text
    assert "│ TitForTat    │    1 │                2.2917 ± — │        1 │" in text
    assert max(map(len, text.splitlines())) <= 80
