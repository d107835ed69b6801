"""Settings read with limits (RELIABILITY J1c): a hostile config file costs bounded time and
memory, every number a setting holds is finite and bounded, and an error quotes at most a little
of the rejected input."""

from __future__ import annotations

import dataclasses
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stratagem.errors import ConfigError, UnknownNameError, shown
from stratagem.settings import (
    CONFIG_BYTES,
    Distinct,
    NonNegativeFloat,
    OutFolder,
    Positive,
    PositiveFloat,
    build,
    read_config,
)

CLI = [sys.executable, "-m", "stratagem.cli.main"]
MEMORY = 1 << 30  # the address space the CLI runs in below: far less than an alias bomb needs


def alias_bomb(key: str, levels: int = 8) -> str:
    """A few hundred bytes of YAML whose aliases expand to 10**levels strings under ``key``."""
    parts = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefghij", "bcdefghijk"[: levels - 1], strict=False):
        parts.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    return f"{key}: {{" + ", ".join(parts) + "}\n"


def limited(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a process whose address space is capped at ``MEMORY``."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=120, preexec_fn=cap
    )


@pytest.mark.parametrize(
    ("command", "text"),
    [
        (["gen-sft"], alias_bomb("datasets")),  # under a known key
        (["eval", "--game", "ipd"], alias_bomb("agent")),  # a file without `game`
        (["eval"], "game: ipd\nagent: &a strategy:TitForTat\nseed: 1\nout: *a\n"),  # one alias
    ],
    ids=["known key", "no game", "one alias"],
)
def test_a_yaml_alias_bomb_is_one_line_quickly_in_bounded_memory(tmp_path, command, text):
    (tmp_path / "bomb.yaml").write_text(text)
    assert len(text) < 500
    start = time.monotonic()
    r = limited([*command, "--config", "bomb.yaml"], tmp_path)
    assert time.monotonic() - start < 60
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "anchors and aliases" in lines[0]
    assert lines[0].startswith("error: config file bomb.yaml is not valid: line ")


def test_a_config_file_over_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("game: ipd\n" + "# padding\n" * (CONFIG_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match=r"big.yaml is over 1 MB"):
        read_config(path)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("seed: " + "1" * 5000 + "\n", "Exceeds the limit"),  # past the interpreter's int digits
        ("game: " + "[" * 5000 + "\n", "nested too deeply"),
    ],
    ids=["5000-digit int", "deep nesting"],
)
def test_a_config_file_that_breaks_the_parser_is_one_config_error(tmp_path, text, words):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words) as info:
        read_config(path)
    assert len(str(info.value)) < 300


def test_the_rejected_input_in_a_config_error_is_capped(tmp_path):
    """A long bad value or key is quoted by its first characters, never whole."""
    cases = {
        "value.yaml": "game: ipd\nagent: strategy:TitForTat\nepisodes: " + "x" * 100_000 + "\n",
        "key.yaml": "game: ipd\n" + "k" * 100_000 + ": 1\n",
        "list.yaml": "game: ipd\nseed: [" + ", ".join(["1"] * 30_000) + "]\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        r = subprocess.run(
            [*CLI, "eval", "--config", name], capture_output=True, text=True, cwd=tmp_path
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-500:]
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and len(lines[0]) < 600, (name, len(r.stderr))


def test_shown_caps_any_value():
    assert shown("abc") == "'abc'"
    assert len(shown("x" * 10**6)) <= 120
    assert shown(list(range(10**6))) == "[0, 1, 2, 3, 4, 5, ...]"
    assert shown(10**5000) == "<an integer of about 5001 digits>"
    assert shown("\udcff") == "'\\udcff'"
    assert shown({"a": [[[[1]]]]}) == "{'a': [[[...]]]}"
    error = UnknownNameError("game", "g" * 10**6, ["ipd", "kuhn"])
    assert len(str(error)) < 250


@dataclasses.dataclass(kw_only=True)
class Example:
    count: Positive = 1
    rate: PositiveFloat = 0.1
    beta: NonNegativeFloat | None = None
    seed: int = 0
    weights: list[float] = dataclasses.field(default_factory=list)
    names: Distinct | None = None
    out: OutFolder = Path("runs")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rate": float("nan")}, "bad value for --rate: Input should be a finite number (got nan)"),
        ({"rate": float("inf")}, "bad value for --rate: Input should be a finite number (got inf)"),
        ({"rate": -1.0}, "bad value for --rate: Input should be greater than 0 (got -1.0)"),
        ({"beta": float("-inf")}, "bad value for --beta: Input should be a finite number"),
        ({"count": 10**20}, "bad value for --count: Input should be less than or equal to "),
        ({"count": 1e20}, "bad value for --count: "),  # pydantic: "exceeded maximum size"
        ({"seed": 10**30}, "bad value for --seed: must be at most 9223372036854775807 in size"),
        ({"weights": [1.0, float("nan")]}, "bad value for --weights: must be a finite number"),
        ({"names": ["a", "b", "a"]}, "'a' is named twice; give each name once"),
        ({"out": ""}, "--out is empty; give a folder for the run"),
        ({"out": "bad\udcff"}, "--out 'bad\\udcff' holds bytes that are not UTF-8"),
    ],
)
def test_settings_hold_finite_bounded_numbers(values: dict[str, Any], message: str):
    with pytest.raises(ConfigError) as info:
        build(Example, values)
    assert str(info.value).startswith(message), str(info.value)


def test_valid_settings_still_build():
    built = build(Example, {"count": 10**9, "rate": 2.5, "seed": -(2**63) + 1, "names": ["a"]})
    assert (built.count, built.rate, built.names, built.out) == (10**9, 2.5, ["a"], Path("runs"))
