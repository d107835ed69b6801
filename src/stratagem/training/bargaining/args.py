"""The settings of ``stratagem train bargaining``: one dataclass, a docstring per field. Kept
apart from the trainer so that ``train bargaining --help`` and a settings check load no model
library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from stratagem.errors import ConfigError
from stratagem.settings import NonNegativeFloat, OutFolder, PositiveFloat
from stratagem.training.args import (
    GRPOArgs,
    check_adapters,
    check_lora_dropout,
    check_schedule,
    require_at_least,
)

if TYPE_CHECKING:
    from stratagem.game import Game


@dataclass
class BargainingArgs(GRPOArgs):
    """Hyperparameters of ``stratagem train bargaining`` (defaults: seed 004 Table 13 where
    legible, SPEC §6 otherwise)."""

    out: OutFolder = Path("runs/bargaining")
    """The run folder: checkpoints, best.json, stages.md, curve.png."""
    scenarios: int = 8
    """Scenarios per step; each is played in both roles, so a step has 2 × scenarios groups."""
    rollouts: int = 8
    """n rollouts per (scenario, role) group; they share the episode seed."""
    opponent: str = "Boulware"
    """The fixed opponent: a bargaining strategy."""
    ir_penalty: bool = False
    """Beyond the paper: −1 for a deal with negative own utility, +1 for ending an NGFT scenario
    without a deal. Off reproduces seed 004's reward."""
    max_context: int | None = None
    """Tokens of context (prompt + max_new_tokens) a decision may use; longer ends the episode
    with reward 0 and loss weight 0. Default: the model's context length."""
    scale: Literal["group", "step"] = "group"
    """Advantage scale: each group's own std (Eq. 7), or one std pooled over the step."""
    kl: NonNegativeFloat = 0.05
    """β of the one-sided KL against the starting policy."""
    learning_rate: PositiveFloat = 1e-5
    """AdamW learning rate."""
    max_rounds: int = 10
    """The negotiation's round limit (a round is one turn)."""
    eval_gft: int = 8
    """GFT validation scenarios of the checkpoint tournament slice, each in both roles (0 with
    eval_ngft 0: no evaluation)."""
    eval_ngft: int = 4
    """NGFT validation scenarios of the checkpoint tournament slice, each in both roles."""
    eval_opponents: list[str] = field(default_factory=lambda: ["Boulware"])
    """Opponents of the checkpoint tournament slice (bargaining strategies)."""
    catalog: list[Path] | None = None
    """CraigslistBargains JSON files to draw items from [the shipped catalog]; training uses
    their train split, the checkpoint slice their validation split."""

    def check(self) -> None:
        """Refuse, before any model loads, what this trainer cannot run.

        Raises:
            ConfigError: naming the option and the value it needs.
        """
        from stratagem.strategies import get_strategy
        from stratagem.training.engines import check_rollout_engine

        minimums = (
            ("steps", 0),
            ("scenarios", 1),
            ("rollouts", 2),
            ("max_new_tokens", 1),
            ("max_rounds", 2),
            ("checkpoint_every", 1),
            ("eval_gft", 0),
            ("eval_ngft", 0),
            ("epochs", 1),
            ("chunk", 1),
        )
        require_at_least(self, minimums, why=" (GRPO compares rollouts)")
        if self.temperature <= 0:
            raise ConfigError("GRPO samples its rollouts: --temperature must be above 0")
        check_lora_dropout(self)
        if self.max_context is not None and self.max_context <= self.max_new_tokens:
            raise ConfigError(
                f"--max-context ({self.max_context}) must exceed --max-new-tokens "
                f"({self.max_new_tokens})"
            )
        if self.eval_ngft and not self.eval_gft:
            raise ConfigError("--eval-gft must be at least 1: the checkpoint score is GFT's")
        for name in [self.opponent, *self.eval_opponents]:
            get_strategy("bargaining", name)  # UnknownNameError, with "did you mean"
        if self.catalog:
            training_game(self)  # a missing file or a bad price is refused before a model loads
        check_adapters(self)
        check_rollout_engine(self)
        check_schedule(self)

    @property
    def evaluates(self) -> bool:
        """Whether checkpoints are evaluated."""
        return self.eval_gft + self.eval_ngft > 0


# ---- rollouts ----


def training_game(args: BargainingArgs) -> Game:
    """The training split, at the training round limit."""
    from stratagem.games import get_game

    return get_game("bargaining", split="train", max_rounds=args.max_rounds, **_catalog(args))


def evaluation_game(args: BargainingArgs) -> Game:
    """The validation split, at the training round limit."""
    from stratagem.games import get_game

    return get_game("bargaining", split="validation", max_rounds=args.max_rounds, **_catalog(args))


def _catalog(args: BargainingArgs) -> dict[str, Any]:
    """The game's ``catalog`` parameter: absent for the shipped catalog (fingerprints unchanged),
    else the files' paths."""
    return {} if not args.catalog else {"catalog": [str(p) for p in args.catalog]}
