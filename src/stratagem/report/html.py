"""One self-contained HTML report: headings, paragraphs, tables and PNG plots inlined as data
URIs, so the file can be mailed or archived on its own. All text is escaped; there is no script.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; margin: 0.5rem 0; } figure { margin: 0; }
figcaption { font-size: 0.85rem; color: #555; }
"""


@dataclass(frozen=True)
class Section:
    """A heading and its blocks: ``str`` (a paragraph), a pandas ``DataFrame`` (a table) or a
    ``Path`` to a PNG file (an inlined figure, captioned with its file name)."""

    heading: str
    blocks: tuple[Any, ...] = ()


def render(title: str, sections: Sequence[Section], float_format: str = "{:.3f}") -> str:
    """Returns the report as one HTML document (escaped text, inlined images, no scripts)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>")
        for block in section.blocks:
            parts.append(_block(block, float_format))
    parts.append("</body></html>")
    return "\n".join(parts)


def _block(block: Any, float_format: str) -> str:
    if isinstance(block, str):
        return f"<p>{html.escape(block)}</p>"
    if isinstance(block, Path):
        data = base64.b64encode(block.read_bytes()).decode("ascii")
        name = html.escape(block.name)
        return (
            f'<figure><img alt="{name}" src="data:image/png;base64,{data}">'
            f"<figcaption>{name}</figcaption></figure>"
        )
    if hasattr(block, "to_html"):
        return block.to_html(
            index=False,
            escape=True,
            na_rep="—",
            float_format=lambda v: float_format.format(v),
            border=0,
        )
    raise TypeError(f"cannot render a {type(block).__name__} in an HTML report")


def write_html(path: str | Path, title: str, sections: Sequence[Section]) -> Path:
    """Writes ``render(title, sections)`` to ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(title, sections), encoding="utf-8")
    return path
