"""MkDocs hook: the command-line reference, generated at build time from the commands' own help
(each command's settings dataclass is its options, their docstrings the help), so the page can
never disagree with ``stratagem <command> --help``."""

from __future__ import annotations

MARKER = "<!-- the reference of every command is generated here -->"


def _help(words: list[str]) -> str:
    from typer.main import get_command

    from stratagem.cli.main import app

    command = get_command(app)
    ctx = command.make_context("stratagem", [*words, "--help"], resilient_parsing=True)
    for word in words:
        command = command.get_command(ctx, word)
        ctx = command.make_context(f"stratagem {' '.join(words)}", [], resilient_parsing=True)
    return command.get_help(ctx)


def reference() -> str:
    """Markdown: one section per command (and per trainer), its help in a code block."""
    from stratagem.cli.main import COMMANDS
    from stratagem.cli.train import TRAINERS

    lines = []
    for name in COMMANDS:
        chains = [[name]] if name != "train" else [["train", t] for t in TRAINERS]
        for words in chains:
            lines += [f"## stratagem {' '.join(words)}", "", "```text", _help(words), "```", ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' hook)
    """Fills the marker of the reference page."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
