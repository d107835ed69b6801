"""Tables (CSV/Parquet/Markdown) and plots (heatmaps, curves) built from metrics and traces."""
