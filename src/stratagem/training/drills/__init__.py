"""Drills: short chats of one game that each show one decision a whole demonstration holds
rarely, so that a small model sees it thousands of times (``gen-sft --game G --drills N``).

One module per game, each with ``drills(n, seed, far, in_game, refuse) -> Iterator[Chat]``
(refusing, with a ConfigError, the options that are another game's); ``DRILLS`` names it.
A new game's drills are one module plus one entry here. Drills are written like any other SFT
chats, so ``train sft`` takes them as they are, and a curriculum trains on drills first, then on
whole games on top of them (``train sft --adapter``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from stratagem.errors import ConfigError
from stratagem.training.sft_data import Chat

DRILLS = {
    "bargaining": "stratagem.training.drills.bargaining",  # the offer beside one's value
    "dond": "stratagem.training.drills.dond",  # which share of a deal is one's own
}


def drills(
    game: str | None,
    n: int,
    seed: int,
    far: float = 0.0,
    in_game: bool = False,
    refuse: bool = False,
) -> Iterator[Chat]:
    """Returns ``n`` drills of ``game``, deterministic in ``seed``; the options as the game's
    module takes them (bargaining: ``far``, the share of far offers, and ``in_game``, drills
    inside whole-game prompts; dond: ``refuse``, accepters that refuse a claim leaving them none
    of the item they value most).

    Raises:
        ConfigError: no game named, ``game`` has no drills, or its drills do not take an option
            that is set.
    """
    if game is None:
        raise ConfigError("--drills needs --game, e.g. --game dond --drills 2000")
    if game not in DRILLS:
        raise ConfigError(
            f"--drills: no drills for --game {game}; games with drills: "
            + ", ".join(sorted(DRILLS))
        )
    return importlib.import_module(DRILLS[game]).drills(n, seed, far, in_game, refuse)
