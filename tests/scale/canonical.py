"""Canonical traces: what must be equal between a local and a distributed run."""

from __future__ import annotations

import json
from pathlib import Path

# timing and cache-state fields: they say how fast a decision ran, not what it was
TIMING = ("seconds",)
CACHE = ("prefill_tokens",)


def canonical(folder: Path) -> list[str]:
    """The trace lines of a run folder sorted by episode id, timing and cache fields dropped."""
    lines = []
    for line in (folder / "traces.jsonl").read_text().splitlines():
        record = json.loads(line)
        for decision in record["decisions"]:
            for key in TIMING:
                decision.pop(key, None)
            for key in CACHE:
                (decision.get("info") or {}).pop(key, None)
        lines.append(json.dumps(record, sort_keys=True, ensure_ascii=False))
    return sorted(lines, key=lambda x: json.loads(x)["episode_id"])


def ids(folder: Path) -> list[str]:
    """Every episode id of a run folder's trace file, in file order (duplicates kept)."""
    return [json.loads(x)["episode_id"] for x in (folder / "traces.jsonl").read_text().splitlines()]
