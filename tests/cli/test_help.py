"""Help answers at once and reads at 80 columns: ``stratagem --help`` and every command's
``--help`` import no model, table or plotting library; option names and defaults are never cut;
help is plain text, and each command's line in the overview is the first line of its own help."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from stratagem.cli.main import COMMANDS, app, load_command
from stratagem.cli.train import TRAINERS

HEAVY = ("torch", "transformers", "pandas", "pyarrow", "matplotlib", "numpy", "scipy", "openai")
MODEL_LIBRARIES = ("torch", "transformers", "peft", "trl", "pandas", "pyarrow", "matplotlib")
COMMAND_LINES = [[], *([name] for name in COMMANDS), *(["train", t] for t in TRAINERS)]

PROBE = """
import json, sys
from stratagem.cli.main import app
try:
    app(sys.argv[1:] + ["--help"], prog_name="stratagem")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {heavy})))
"""


def _help(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", "from stratagem.cli.main import main; main()", *args, "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("args", COMMAND_LINES, ids=lambda a: " ".join(a) or "stratagem")
def test_help_imports_no_heavy_library(args):
    code = PROBE.format(heavy=set(HEAVY))
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return match.group(1) if match else text


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_overview_line_is_the_first_line_of_the_commands_own_help(name):
    command = load_command(name)
    assert COMMANDS[name].summary == _first_sentence(command.help or "")
    assert len(COMMANDS[name].summary) <= 61  # the overview at 80 columns shows it whole


def test_the_overview_lists_every_command_whole_at_80_columns():
    text = _help()
    for name, entry in COMMANDS.items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(entry.summary)}$", text, re.M), name
    assert max(map(len, text.splitlines())) <= 80


@pytest.mark.parametrize("args", COMMAND_LINES[1:], ids=" ".join)
def test_command_help_is_plain_and_whole_at_80_columns(args):
    text = _help(*args)
    assert max(map(len, text.splitlines())) <= 80
    assert "``" not in text and "`" not in text  # docstring markup shown as plain text
    assert "stratagem.cli" not in text and "App. " not in text and "§" not in text
    command = load_command(args[0])
    if len(args) > 1:
        command = command.get_command(None, args[1])
    for param in command.params:  # every option name appears whole
        for flag in param.opts:
            assert re.search(rf"(^|[ ,]){re.escape(flag)}([ ,/]|$)", text, re.M), flag


def test_an_unknown_command_is_refused_without_loading_any():
    runner = CliRunner()
    result = runner.invoke(app, ["evaluate"])
    assert result.exit_code == 2 and "No such command" in result.output
    code = (
        "import sys\nfrom stratagem.cli.main import app\ntry:\n    app(['evaluate'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('stratagem.cli.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    shared = ["stratagem.cli.launch", "stratagem.cli.main", "stratagem.cli.options"]
    assert done.stdout.strip() == str(shared)  # no command's module


@pytest.mark.parametrize("name", ["claim-probe", "drills"])
def test_a_command_that_moved_out_says_where(name):
    done = subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", name, "--kind", "joint"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert f"stratagem {name} moved: run python -m experiments." in done.stderr


REFUSED = """
import json, sys
from stratagem.cli.main import main
sys.argv = ["stratagem", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps([code, sorted(m for m in sys.modules if m.split(".")[0] in {heavy})]))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["train", "sepo", "--steps", "-1"],
        ["train", "sft", "--data", "no-such-folder"],
        ["selfplay-eval", "no-such-run"],
        ["eval", "--game", "no-such-game"],
        ["tournament", "--game", "ipd", "--agents", "TitForTat,TitForTat"],
    ],
    ids=" ".join,
)
def test_a_bad_setting_is_refused_before_any_model_library_loads(args, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", REFUSED.format(heavy=set(MODEL_LIBRARIES)), *args],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    code, heavy = json.loads(result.stdout.splitlines()[-1])
    assert code == 2 and heavy == [], result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
