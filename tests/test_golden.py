"""Golden traces per game; regenerate with ``make golden`` after a deliberate change."""

import pytest

from stratagem.games import GAMES
from tests.golden.regenerate import HERE, prompts, render


@pytest.mark.parametrize("name", GAMES.names())
def test_golden_trace(name):
    assert render(name) == (HERE / f"{name}.jsonl").read_text(), "run `make golden` if intended"


@pytest.mark.parametrize("name", GAMES.names())
def test_golden_prompts(name):
    assert prompts(name) == (HERE / f"{name}.prompts.txt").read_text()
