"""Drills: short chats of one game that each show one decision a whole demonstration holds
rarely, so that a small model sees it thousands of times (``python -m experiments.drills
--game G --drills N``).

One module per game, each with ``drills(n, seed, **options) -> Iterator[Chat]`` and
``OPTIONS``, the names of the ``DrillSettings`` options (``settings.py``) it takes; ``DRILLS``
names the module. A new game's drills are one module plus one entry here. Drills are written
like any other SFT chats, so ``train sft`` takes them as they are, and a curriculum trains on
drills first, then on whole games on top of them (``train sft --adapter``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from experiments.drills.settings import DrillSettings
from stratagem.errors import ConfigError

if TYPE_CHECKING:
    from stratagem.training.sft.data import Chat

__all__ = ["DRILLS", "DrillSettings", "drills"]

DRILLS = {
    "bargaining": "experiments.drills.bargaining",  # the offer beside one's value
    "dond": "experiments.drills.dond",  # which share of a deal is one's own
}


def drills(game: str | None, n: int, seed: int, **options: Any) -> Iterator[Chat]:
    """Returns ``n`` drills of ``game``, deterministic in ``seed``; ``options`` as the game's
    module takes them (``DrillSettings``, without the ``drills_`` prefix).

    Raises:
        ConfigError: no game named, ``game`` has no drills, or its drills do not take an option
            that is given.
    """
    if game is None:
        raise ConfigError("--drills needs --game, e.g. --game dond --drills 2000")
    if game not in DRILLS:
        raise ConfigError(
            f"--drills: no drills for --game {game}; games with drills: "
            + ", ".join(sorted(DRILLS))
        )
    module = importlib.import_module(DRILLS[game])
    defaults = DrillSettings.option_defaults()
    for name, value in options.items():
        flag = "--drills-" + name.replace("_", "-")
        if name not in defaults:
            raise ConfigError(f"{flag}: no such drill option")
        if name not in module.OPTIONS and value != defaults[name]:
            takers = [g for g, m in DRILLS.items() if name in importlib.import_module(m).OPTIONS]
            raise ConfigError(f"{flag} is for --game {' or '.join(takers)} drills, not {game}")
    taken = {name: value for name, value in options.items() if name in module.OPTIONS}
    return module.drills(n, seed, **taken)
