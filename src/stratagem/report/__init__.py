"""Tables (CSV/Parquet/Markdown) and plots (heatmaps, curves) built from metrics and traces.

The imports below are the table of contents of the per-game tournament reports: each module
registers its report in ``report.registry.TOURNAMENT_REPORTS`` under its game's name. They stay
light at import (pandas and matplotlib load when a report is written).
"""

from stratagem.report import bargaining, dond  # noqa: F401 (registers the tournament reports)
