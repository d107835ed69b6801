"""The drill options (``--drills N`` and the options of each game's drills), one settings group
that the drills command and the drill writers share."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import Field

from stratagem.errors import ConfigError
from stratagem.settings import NonNegative


@dataclasses.dataclass(kw_only=True)
class DrillSettings:
    """The drills to write (to OUT/GAME-drills)."""

    drills: NonNegative = 0
    """How many drills to write — bargaining: one-decision comparisons of an offer with one's
    value; dond: four-turn games whose closing proposals take one's own share of a deal."""
    drills_far: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Bargaining drills: the share whose offer (with --drills-answers, the one answered last) is
    1.3–4 times above or below the value (a hard bargainer's early offers); the rest lie within
    ±30 % of it."""
    drills_in_game: bool = False
    """Bargaining drills inside whole games (the game's system prompt, a train-split catalog
    item, the game's turns up to an answer to an offer; ~1,000 tokens) instead of the role
    sentence and one state line (~150)."""
    drills_answers: Annotated[int, Field(ge=1, le=4)] = 1
    """In-game bargaining drills: each is cut after its k-th answer to an offer, k drawn from 1
    to this; the offers before the k-th lose the responder money (it refuses them)."""
    drills_refuse: bool = False
    """Dond drills whose accepter refuses, with a counter-claim, a claim leaving it no best item."""
    drills_joint: bool = False
    """Dond drills under λ = 1 in which both seats state their values and the accepter deals
    only on a joint-best claim, else counter-claims the joint-best division."""
    drills_flawed: bool = False
    """Joint drills a third of whose claims (openings and counter-claims) write the reader's
    share one unit off (an item left to no one or given to both); the seat answering names the
    flaw before it answers, and the flawed claim carries no loss."""
    drills_check: bool = False
    """Joint or refusal drills whose accepter first writes its check: per item type both values
    and whose it is (joint), or its best item and how many units the claim leaves it (refusal)."""

    @staticmethod
    def option_defaults() -> dict[str, Any]:
        """Each drill option's default, by the name a game's ``drills`` takes (``drills_far`` ->
        ``far``); ``drills`` itself, the count, is not an option."""
        fields = dataclasses.fields(DrillSettings)
        return {f.name.removeprefix("drills_"): f.default for f in fields if f.name != "drills"}

    def drill_options(self) -> dict[str, Any]:
        """The drill options set away from their defaults, by the name a game's ``drills``
        takes.

        Raises:
            ConfigError: an option is set but no drills are asked for (it would be ignored).
        """
        options = {
            name: getattr(self, "drills_" + name)
            for name, default in self.option_defaults().items()
            if getattr(self, "drills_" + name) != default
        }
        if options and not self.drills:
            flags = ", ".join(f"--drills-{name.replace('_', '-')}" for name in options)
            raise ConfigError(f"{flags}: drill options need --drills N")
        return options
