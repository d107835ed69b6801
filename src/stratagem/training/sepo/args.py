"""The settings of ``stratagem train sepo``: one dataclass, a docstring per field (seed 000
Table 17 for the defaults). Kept apart from the trainer so that ``train sepo --help`` and a
settings check load no model library.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.settings import NonNegativeFloat, OutFolder, PositiveFloat
from stratagem.training.args import GRPOArgs, check_policy, check_schedule, require_at_least

Penalty = Literal["shared", "per_rollout", "own_episodes"]
Control = Literal["none", "payoff"]
ARM_MEANING = {  # the arms of SEPO's comparison (``SEPOArgs.arm``)
    "safety": "λ = 1, each pool's episodes carry the term of J they measure",
    "drop": "λ = 0, the exploit and collusive pools' episodes carry reward 0",
    "payoff": "λ = 0, every pool's episodes carry the policy's payoff",
}
ARMS = tuple(ARM_MEANING)
BEST_RESPONSE_GAMES = ("kuhn",)  # games whose SEPO exploit pool can hold the exact best response


@dataclass
class SEPOArgs(GRPOArgs):
    """Hyperparameters of ``stratagem train sepo`` (defaults: SPEC §6 / seed 000 Table 17)."""

    game: str = "kuhn"
    """A SEPO game: ipd, auction, negotiation, multi_issue or kuhn."""
    out: OutFolder = Path("runs/sepo")
    """The run folder: checkpoints, best.json, curve.png."""
    rollouts: int = 4
    """n rollouts per opponent; a group shares its episode seed."""
    penalty: Penalty = "own_episodes"
    """Where the safety terms enter: own_episodes (the gradient of J), per_rollout (Eq. 3),
    shared (Alg. 1; zero gradient, an ablation)."""
    credit: Literal["return", "immediate"] = "return"
    """A round's return: reward-to-go, or the round's own reward (the paper's literal form)."""
    normalisation: Literal["round", "episode"] = "round"
    """Advantages per round, or the episode's for every round (ablation)."""
    scale: Literal["step", "group"] = "step"
    """One std pooled over the step (λ keeps its meaning), or each group's own (ablation)."""
    normalise: bool = True
    """Payoffs × 3 / reference payoff in rewards, evaluation and the best-checkpoint choice."""
    safety: float = 1.0
    """Multiplies every λ of J in the training rewards: 1 trains on J as the game declares it;
    0 trains on payoff alone (plain GRPO), the control of a SEPO run: with --control none its
    exploit and collusive pools' episodes carry reward 0 (the ``drop`` arm). Evaluation reports
    J with the game's own λ either way."""
    control: Control = "none"
    """The λ = 0 control's exploit and collusive pools (own_episodes): none keeps --safety 0 as
    it is (those pools' episodes carry reward 0, the ``drop`` arm); payoff rewards them with the
    policy's own payoff exactly like the training pool's, so the run differs from its λ = 1
    twin in the safety term only (same episodes, groups, weights and pooled σ); needs
    --safety 0."""
    format_penalty: NonNegativeFloat = 0.0
    """Subtracted from a round's reward (in the rewards' payoff units) for each of the policy's
    decisions in it that named no legal action and were settled by the fallback, so answers that
    do not parse are trained away rather than credited with the fallback's action; 0: the
    payoff alone."""
    kl: NonNegativeFloat | None = None
    """β of the one-sided KL; default 0.01 (the game may declare another: Kuhn 0.2)."""
    learning_rate: PositiveFloat | None = None
    """AdamW learning rate; default 1e-5 (Kuhn 3e-6)."""
    temperature: float = 0.8
    """Sampling temperature of the rollouts; log-probs and KL are taken at it too."""
    eval_episodes: int = 20
    """Episodes per opponent in the checkpoint evaluation (0: skip it)."""
    exploit_best_response: bool = False
    """Kuhn, --penalty own_episodes: add to the exploit pool the exact best response to the
    policy as the exploitability metric reads it, recomputed before every step (training only:
    evaluation keeps the game's pools)."""

    def check(self) -> None:
        """Refuse, before any model loads, what SEPO cannot train or would silently misread.

        Raises:
            ConfigError: naming the option and the value it needs.
        """
        from stratagem.games import GAMES, get_game
        from stratagem.metrics.sepo import SEPOGame
        from stratagem.training.engines import check_rollout_engine

        if self.safety < 0:
            raise ConfigError(f"--safety multiplies the λ of J: it must be ≥ 0, got {self.safety}")
        if self.control == "payoff" and self.safety != 0:
            raise ConfigError(
                f"--control payoff is the λ = 0 control: it needs --safety 0, not {self.safety:g}"
            )
        if self.control == "payoff" and self.penalty != "own_episodes":
            raise ConfigError(
                "--control payoff rewards the exploit and collusive pools' own episodes: it "
                f"needs --penalty own_episodes, not {self.penalty}"
            )
        if not isinstance(get_game(self.game), SEPOGame):
            sepo_games = [n for n in GAMES if isinstance(get_game(n), SEPOGame)]
            raise ConfigError(
                f"SEPO trains only the SEPO games ({', '.join(sepo_games)}), not {self.game}"
            )
        minimums = (
            ("steps", 0),
            ("rollouts", 1),
            ("max_new_tokens", 1),
            ("checkpoint_every", 1),
            ("eval_episodes", 0),
            ("epochs", 1),
            ("chunk", 1),
            ("ref_refresh_every", 0),
        )
        require_at_least(self, minimums)
        if self.temperature <= 0:
            raise ConfigError("SEPO samples its rollouts: --temperature must be above 0")
        if self.exploit_best_response and self.game not in BEST_RESPONSE_GAMES:
            raise ConfigError(
                "--exploit-best-response needs a game whose exact best response is computed "
                f"({', '.join(BEST_RESPONSE_GAMES)}), not {self.game}"
            )
        if self.exploit_best_response and self.penalty != "own_episodes":
            # shared cancels in the baseline; per_rollout's penalty ignores the rollout's actions
            raise ConfigError(
                "--exploit-best-response trains only with --penalty own_episodes, not "
                f"{self.penalty}: the other modes carry no gradient from exploit episodes"
            )
        check_policy(self)
        check_rollout_engine(self)
        check_schedule(self)

    def resolved(self) -> SEPOArgs:
        """Returns these args with unset per-game defaults filled from the game's
        ``train_defaults`` (SEPO: β 0.01, lr 1e-5; Kuhn declares β 0.2, lr 3e-6)."""
        from stratagem.games import get_game
        from stratagem.metrics.sepo import as_sepo_game

        defaults = {
            "kl": 0.01,
            "learning_rate": 1e-5,
            **as_sepo_game(get_game(self.game)).train_defaults,
        }
        return dataclasses.replace(
            self,
            kl=self.kl if self.kl is not None else defaults["kl"],
            learning_rate=self.learning_rate
            if self.learning_rate is not None
            else defaults["learning_rate"],
        )

    def fingerprint(self) -> dict[str, Any]:
        """Returns the resolved arguments that identify a run, as JSON values: ``steps`` and
        ``save_total_limit`` are left out, so a run can be resumed with more steps or another disk
        policy.
        """
        d = GRPOArgs.fingerprint(self.resolved())
        for key, default in (("format_penalty", 0.0), ("control", "none")):
            if d.get(key) == default:  # runs made before the option resume
                d.pop(key)
        return d

    def arm(self) -> str:
        """The run's name as an arm of SEPO's comparison: ``safety`` (λ = 1), ``drop`` (λ = 0,
        the exploit and collusive pools' episodes carry no reward), ``payoff`` (λ = 0, every
        pool rewarded by the payoff), else ``safety-<λ>``."""
        return arm_of(self.safety, self.control)


def arm_of(safety: float, control: str = "none") -> str:
    """The arm a run of ``--safety safety --control control`` is (see ``SEPOArgs.arm``)."""
    if control == "payoff":
        return "payoff"
    return {1.0: "safety", 0.0: "drop"}.get(float(safety), f"safety-{safety:g}")


def arm_settings(arm: str) -> dict[str, Any]:
    """The ``safety`` and ``control`` settings of one of ``ARMS``.

    Raises:
        UnknownNameError: for another name.
    """
    settings = {
        "safety": {"safety": 1.0, "control": "none"},
        "drop": {"safety": 0.0, "control": "none"},
        "payoff": {"safety": 0.0, "control": "payoff"},
    }
    if arm not in settings:
        raise UnknownNameError("SEPO arm", arm, ARMS)
    return settings[arm]


# ---- rollouts ----
