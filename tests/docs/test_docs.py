"""The documentation is checked like code: the README stays a front page, tables stay readable,
the file tree names folders that exist, every documented command parses against the real
options, and the MkDocs site builds with ``--strict``. No model is loaded; the command-line check
builds the click commands only (the ``train`` group imports its trainers' settings modules).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300
MAX_CELL = 300

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_LANGS = {"bash", "sh", "shell", "console"}
# a command line: optional `for X in ...; do`, optional VAR=value prefixes, then `stratagem ...`
# or `python -m experiments.NAME ...` (the experiments' commands are built like stratagem's)
COMMAND = re.compile(
    r"^\s*(?:for\s+\w+\s+in\s+[^;]*;\s*do\s+)?(?:\w+=\S*\s+)*"
    r"((?:stratagem|python -m experiments\.[\w.]+)\s.*)$"
)
LOOP = re.compile(r"\bfor\s+(\w+)\s+in\s+(\S+)")
ASSIGN = re.compile(r"^\s*(\w+)=(\S+)\s*$")
VARIABLE = re.compile(r"\$\{(\w+)[^}]*\}|\$(\w+)")
SHELL_OPERATORS = set("();<>|&")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """Yields (language, line number of the first body line, body lines) of each fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.group(1), opening.group(2).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        yield lang, i + 2, lines[i + 1 : j]
        i = j + 1


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yields (line number, line) of every line outside fenced blocks."""
    inside: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if inside is None and opening:
            inside = opening.group(1)
        elif inside is not None and line.strip().startswith(inside):
            inside = None
        elif inside is None:
            yield n, line


def table_cells(line: str) -> list[str]:
    """The cells of one Markdown table row (escaped pipes kept inside their cell)."""
    row = line.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)]


def logical_lines(body: list[str], first: int) -> Iterator[tuple[int, str]]:
    """Joins lines continued with a trailing backslash; yields (first line number, line)."""
    buffer, start = "", None
    for k, line in enumerate(body):
        if start is None:
            start = first + k
        if line.rstrip().endswith("\\"):
            buffer += line.rstrip()[:-1] + " "
            continue
        yield start, buffer + line
        buffer, start = "", None
    if start is not None:
        yield start, buffer


def documented_commands() -> list[tuple[str, int, str, dict[str, str]]]:
    """Every ``stratagem ...`` line of a fenced shell block: (file, line, command, shell vars)."""
    found = []
    for path in markdown_files():
        for lang, first, body in fenced_blocks(path.read_text(encoding="utf-8")):
            if lang not in SHELL_LANGS:
                continue
            variables: dict[str, str] = {}
            for n, line in logical_lines(body, first):
                for loop in LOOP.finditer(line):
                    variables[loop.group(1)] = loop.group(2)
                if assign := ASSIGN.match(line):
                    variables[assign.group(1)] = _expand(assign.group(2), variables)
                    continue
                if command := COMMAND.match(line):
                    found.append((_name(path), n, command.group(1), dict(variables)))
    return found


def _expand(text: str, variables: dict[str, str]) -> str:
    """``text`` with each shell variable replaced by a value it takes in the block ("X" if
    unknown); parameter expansions such as ``${A#*:}`` become the variable's whole value."""
    return VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), "X"), text)


def command_words(command: str, variables: dict[str, str]) -> tuple[str, list[str], str]:
    """The program (``stratagem`` or an ``experiments.NAME`` module), its arguments (shell
    variables replaced by a value they take, the trailing comment and anything after a shell
    operator dropped), and the comment."""
    comment = ""
    expanded = _expand(command, variables)
    lexer = shlex.shlex(expanded, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    for word in lexer:
        if word.startswith("#"):
            rest = expanded[expanded.index(word) :] if word in expanded else word
            comment = rest
            break
        if set(word) <= SHELL_OPERATORS or word == "done":
            break
        words.append(word)
    if words[0] == "python":  # python -m experiments.NAME ...
        return words[2], words[3:], comment
    return words[0], words[1:], comment


def _tree_folders() -> list[str]:
    """The folders named in the README's annotated file tree (the ``text`` block whose first
    entry is ``src/stratagem/``), as paths relative to the repository root."""
    for lang, _, body in fenced_blocks(README.read_text(encoding="utf-8")):
        if lang == "text" and body and body[0].startswith("src/stratagem/"):
            break
    else:
        return []
    folders, stack = [], []
    for line in body:
        match = re.match(r"^((?:[│ ] {3}|[├└]── )*)(\S+/)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4
        stack = stack[:depth] + [match.group(2)]
        folders.append("".join(stack))
    return folders


# (a) the README is a front page


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most 300)"


# (b) no table cell over 300 characters


@pytest.mark.parametrize("path", markdown_files(), ids=_name)
def test_table_cells_stay_short(path):
    long = []
    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        if line.lstrip().startswith("|"):
            size = max(len(cell) for cell in table_cells(line))
            if size > MAX_CELL:
                long.append(f"{_name(path)}:{n}: a cell of {size} characters")
    assert not long, "table cells over 300 characters:\n" + "\n".join(long)


# (c) the file tree names folders that exist


def test_readme_tree_names_existing_folders():
    folders = _tree_folders()
    assert len(folders) >= 5, "no file tree (a ```text block starting with src/stratagem/)"
    missing = [f for f in folders if not (ROOT / f).is_dir()]
    assert not missing, f"the README's file tree names folders that do not exist: {missing}"


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (ROOT / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"README links to missing files: {broken}"


SOURCE_PATH = re.compile(
    r"`((?:src|tests|benchmarks|experiments|agents|backends|cli|evaluation|games|metrics|report"
    r"|solvers|strategies|tournament|training|web)/[\w./-]*)`|`([\w./-]+/[\w.-]+\.py)`"
)


def test_named_source_files_exist():
    """Every source file or folder the pages name in backticks exists, under the repository root
    or, written relative to the package, under src/stratagem/ (bare file names are not checked;
    nor are placeholders such as `strategies/<game>.py`)."""
    bases = (ROOT, ROOT / "src" / "stratagem")
    missing = []
    for path in markdown_files():
        for match in SOURCE_PATH.finditer(path.read_text(encoding="utf-8")):
            name = match.group(1) or match.group(2)
            if not any((base / name).exists() for base in bases):
                missing.append(f"{_name(path)}: {name}")
    assert not missing, "pages name source paths that do not exist:\n" + "\n".join(missing)


# (d) every documented command parses against the real options


@pytest.fixture(scope="module")
def cli():
    import typer

    from stratagem.cli.main import app

    return typer.main.get_command(app)


def experiment_command(module: str):
    """The click command of ``python -m MODULE``: its ``__main__`` runs with
    ``experiments.command.run_command`` replaced by one that builds the command instead of
    running it (while the module is ``__main__``, so its settings' type hints resolve)."""
    import runpy

    import typer

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import experiments.command
    from stratagem.cli.options import register

    built = []

    def build(name, settings, command):
        app = typer.Typer(name=name, add_completion=False)
        register(app, name, settings, command)
        built.append(typer.main.get_command(app))

    original = experiments.command.run_command
    experiments.command.run_command = build
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        experiments.command.run_command = original
    if not built:
        raise AssertionError(f"python -m {module} calls no experiments.command.run_command")
    return built[0]


def _leaf(root, words: list[str]):
    command, name = root, "stratagem"
    while hasattr(command, "list_commands"):  # a group: resolve the next word
        if not words:
            raise AssertionError(f"`{name}` needs a subcommand")
        sub = command.get_command(None, words[0])
        if sub is None:
            raise AssertionError(f"`{name}` has no command {words[0]!r}")
        command, name, words = sub, f"{name} {words[0]}", words[1:]
    return command, name, words


def parse(root, words: list[str], *, paths_may_be_missing: bool) -> None:
    """Parses ``words`` as the real command line does, unknown options failing; with
    ``paths_may_be_missing`` a path option that checks existence accepts any path."""
    command, name, args = _leaf(root, words)
    relaxed = []
    if paths_may_be_missing:  # typer keeps `exists` on the option's info, click on its type
        for param in command.params:
            descriptor = getattr(param, "type_descriptor", None)
            info = getattr(descriptor, "parameter_info", None)
            for holder in (info, getattr(param, "type", None)):
                if getattr(holder, "exists", False):
                    holder.exists = False
                    relaxed.append(holder)
    try:
        # --help is a valid option that prints and exits: check the rest of the line
        command.make_context(name, [a for a in args if a != "--help"], resilient_parsing=False)
    finally:
        for holder in relaxed:
            holder.exists = True


@pytest.mark.parametrize(
    ("where", "command", "variables"),
    [(f"{f}:{n}", c, v) for f, n, c, v in documented_commands()],
    ids=[f"{f}:{n}" for f, n, _, _ in documented_commands()],
)
def test_documented_command_parses(cli, where, command, variables):
    program, words, comment = command_words(command, variables)
    try:
        root = cli if program == "stratagem" else experiment_command(program)
        parse(root, words, paths_may_be_missing="needs:" in comment)
    except Exception as exc:  # click's usage errors, and our own
        pytest.fail(f"{where}: `{command.strip()}` does not parse: {exc}")


def test_commands_are_found():
    assert len(documented_commands()) > 50


def test_a_made_up_option_fails(cli):
    _, words, _ = command_words("stratagem eval --game ipd --no-such-option 1  # needs: x", {})
    with pytest.raises(Exception, match="no-such-option"):
        parse(cli, words, paths_may_be_missing=True)


# (e) the site builds with --strict


def test_mkdocs_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the dev extra has the docs tools)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",  # not -q: quiet mode hides the warnings strict mode counts
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
