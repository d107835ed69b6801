"""The settings of ``stratagem train selfplay`` (``SelfPlayArgs``: one field per option, a
docstring each, checked before any model loads) and the game every self-play game is played in.
The loop itself is ``selfplay``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from stratagem.errors import ConfigError
from stratagem.games.dond import DEFAULT_MAX_TURNS
from stratagem.settings import OutFolder, PositiveFloat, normal_path, normal_paths
from stratagem.training.args import (
    PolicyArgs,
    RunArgs,
    SamplingArgs,
    TRLArgs,
    check_adapters,
    check_lora_dropout,
    require_at_least,
)

# how a run is carried out, not what it computes: left out of a run's fingerprint
RUNTIME_OPTIONS = (
    "iterations",
    "patience",
    "max_live",
    "save_total_limit",
    "gradient_checkpointing",
)
# options added after runs were made: left out of the fingerprint at their defaults, so that
# those runs resume
LATER_OPTIONS = ("plays_per_context", "select_games", "partner_games", "partner", "min_of_best")


@dataclass
class SelfPlayArgs(TRLArgs, SamplingArgs, RunArgs, PolicyArgs):
    """Hyperparameters of ``stratagem train selfplay`` (defaults: seed 002 §3 where it gives
    them)."""

    out: OutFolder = Path("runs/selfplay")
    """The run folder: checkpoints, traces per iteration, best.json, curves.png, iterations.md."""
    lam: float = 0.0
    """λ of the objective R_i + λ·R_j: 0 semi-competitive, 1 cooperative, -1 zero-sum."""
    max_turns: int = DEFAULT_MAX_TURNS
    """Accepted turns before messages close and both seats must propose."""
    iterations: int = 10
    """N, the most self-play iterations (a resumed run may be given more)."""
    games: int = 500
    """K, self-play games per iteration."""
    plays_per_context: int = 1
    """Games played on each training context drawn in an iteration (K / this many draws; --games
    must be a multiple). Above 1, a seat is kept when it beats the mean of the seats of its own
    context's games (a context drawn twice shares one mean), not the iteration's mean (seed
    002's rule): a per-context baseline, so that contexts rich in value are not kept for being
    rich. Not under λ = -1, where every context's mean is 0 already."""
    min_of_best: float = 0.0
    """A kept seat must also score at least this fraction (from 0 to 1) of the best objective
    score any division of its context would give it, self-play and partner seats alike. Under
    λ = 1 the best is the joint-best division's value, so 0.8 keeps deals at or near it and
    drops agreements the pair could have done much better on, such as one seat giving the other
    everything (10 of a best up to 19), which the mean keeps
    whenever failed games pull it down. Under every λ ≤ 0 the best is 10 (the seat keeps every
    item), so it keeps the greediest deals, and under -1 none of the zero-score seats. 0: the
    mean alone (the paper's rule)."""
    patience: int = 2
    """Stop once the selection score has not beaten its best for this many iterations (0: never
    stop early)."""
    stop_on: Literal["auto", "selfplay", "fixed"] = "auto"
    """The selection score of early stopping and best.json: the self-play score, the score against
    the fixed agent, or auto (self-play, except under λ = -1, where self-play always scores 0)."""
    select_games: int = 0
    """Games per evaluation played only to choose best.json and when to stop early, on held-out
    contexts none of the evaluation games is played on (nor their mirrors), so that the rows
    reported are not the games the best was chosen on: self-play games, or games against the
    fixed agent where the selection follows that score (--stop-on fixed, or auto under λ = -1).
    0: choose on the evaluation games themselves, which on a few dozen games picks noise."""
    partner_games: int = 0
    """Games per iteration also played against a fixed agent (--partner) on training contexts,
    the policy alternating seats; the policy's seat of each whose objective score is above the
    mean of the policy's seats in those games joins the kept set (one mean over all of them:
    no per-context baseline, and under λ = -1 no zero-score rule). Demonstrations of dealing
    with a partner other than itself: self-play alone teaches the policy its own partner's
    habits. 0: self-play games only (the paper's rule)."""
    partner: str | None = None
    """The rule-based agent of --partner-games (default: --opponent). Another agent than
    --opponent keeps the evaluation against --opponent one with a partner the policy never
    trained with."""
    opponent: str = "FairSplit"
    """The fixed rule-based agent each iteration is evaluated against."""
    eval_games: int = 100
    """Games per evaluation, in self-play and against the fixed agent each."""
    temperature: float = 1.0
    """Sampling temperature of every game (seed 002: 1); 0 is greedy."""
    max_new_tokens: int = 128
    """Generated tokens per answer at most."""
    max_live: int = 64
    """Games in flight, hence the most turns one batched generation holds."""
    learning_rate: PositiveFloat = 1e-4
    """Peak learning rate of each iteration's SFT (cosine schedule)."""
    epochs: PositiveFloat = 3.0
    """Passes over an iteration's kept chats (seed 002: 3)."""
    gradient_checkpointing: bool = False
    """Recompute the decoder's activations in the backward pass of each iteration's SFT: a
    fraction of its memory, at more time (the games keep their KV cache). The same updates:
    left out of the fingerprint, so a run may resume with it on or off."""
    contexts: Path | None = None
    """A context file in the original DoND format (a line per seat's view: count value count
    value count value) to play every game on, instead of every valid context; either way a
    tenth of the contexts is held out for evaluation and never trained on."""

    def check(self) -> None:
        """Refuse, before any model loads, settings the trainer cannot run.

        Raises:
            ConfigError: naming the option and the value it needs.
            UnknownNameError: the fixed opponent is not a DoND strategy.
        """
        from stratagem.strategies import get_strategy

        minimums = (
            ("iterations", 0),
            ("games", 1),
            ("patience", 0),
            ("eval_games", 1),
            ("select_games", 0),
            ("partner_games", 0),
            ("max_new_tokens", 1),
            ("max_live", 1),
            ("max_turns", 1),
            ("batch_size", 1),
            ("grad_accum", 1),
            ("max_length", 1),
            ("lora_rank", 1),
        )
        require_at_least(self, (*minimums, ("plays_per_context", 1)))
        if self.plays_per_context > 1 and self.lam == -1:
            raise ConfigError(
                "--plays-per-context keeps the same seats as 1 under --lam -1 (every context's "
                "mean is 0) and only plays fewer contexts: leave it at 1"
            )
        if self.games % self.plays_per_context:
            raise ConfigError(
                f"--games ({self.games}) must be a multiple of --plays-per-context "
                f"({self.plays_per_context})"
            )
        if not 0.0 <= self.min_of_best <= 1.0:
            raise ConfigError(f"--min-of-best must be in [0, 1], got {self.min_of_best}")
        if not -1.0 <= self.lam <= 1.0:
            raise ConfigError(f"--lam must be in [-1, 1], got {self.lam}")
        if self.temperature < 0:
            raise ConfigError(f"--temperature must be at least 0, got {self.temperature}")
        if self.epochs <= 0 or self.learning_rate <= 0:
            raise ConfigError("--epochs and --learning-rate must be above 0")
        check_lora_dropout(self)
        if self.stop_on == "selfplay" and self.lam == -1 and self.patience:
            raise ConfigError(
                "under --lam -1 every self-play game scores 0 in all: use --stop-on fixed "
                "(or auto), or --patience 0"
            )
        get_strategy("dond", self.opponent)  # UnknownNameError, with a "did you mean"
        if self.partner is not None:
            if not self.partner_games:
                raise ConfigError("--partner names the agent of --partner-games: set both")
            get_strategy("dond", self.partner)
        if self.contexts is not None and not Path(self.contexts).is_file():
            raise ConfigError(f"--contexts: no file {self.contexts}")
        check_adapters(self)

    def fingerprint(self) -> dict[str, Any]:
        """The settings that identify a run, as JSON values: ``iterations`` and ``patience`` are
        left out (a run may be extended), as are ``max_live``, ``save_total_limit`` and
        ``gradient_checkpointing`` (batching, disk and memory policy, not results); a context
        file is named by its path and content hash."""
        d = asdict(self)
        for runtime in RUNTIME_OPTIONS:
            d.pop(runtime)
        for later in LATER_OPTIONS:
            if d[later] == SelfPlayArgs.__dataclass_fields__[later].default:
                d.pop(later)
        d["out"], d["adapter"] = normal_path(self.out), normal_paths(self.adapter)
        d["contexts"] = None if self.contexts is None else str(self.contexts)
        if self.contexts is not None:  # the file's content names the run, not only its path
            d["contexts_sha256"] = dond_game(self).params["contexts_sha256"]
        return d

    @property
    def selects_on_fixed(self) -> bool:
        """Whether early stopping and best.json follow the score against the fixed agent."""
        return self.stop_on == "fixed" or (self.stop_on == "auto" and self.lam == -1)

    @property
    def selection(self) -> str:
        """The evaluation row key early stopping and best.json follow: the selection games'
        score with ``select_games``, else the evaluation games' own."""
        if self.select_games:
            return "select_score"
        return "fixed_score" if self.selects_on_fixed else "selfplay_score"


def dond_game(args: SelfPlayArgs) -> Any:
    """The game of every self-play game: DoND under ``args``' λ, turn cap and contexts."""
    from stratagem.games import get_game

    contexts = None if args.contexts is None else str(args.contexts)
    return get_game("dond", lam=args.lam, max_turns=args.max_turns, contexts=contexts)
