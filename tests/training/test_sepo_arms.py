"""The three arms of SEPO's claim on constructed IPD episodes, computed by hand: ``safety``
(λ = 1), ``drop`` (λ = 0 as ``--safety 0``: the exploit and collusive pools' episodes carry
reward 0) and ``payoff`` (λ = 0, every pool rewarded by the payoff, ``--control payoff``)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.game import RoundResult
from stratagem.games import get_game
from stratagem.pools import Pools
from stratagem.runs import RunFolder
from stratagem.trace import Trace
from stratagem.training.advantages import step_advantages
from stratagem.training.checkpoints import TrainerState
from stratagem.training.sepo.ablation import ablation_table, arms, last_checkpoint_markdown
from stratagem.training.sepo.args import SEPOArgs, arm_settings
from stratagem.training.sepo.rewards import step_groups

POOLS = Pools(train=("TitForTat",), exploit=("AlwaysDefect",), collusive=("AlwaysCooperate",))
PAYOFFS = {"CC": (3.0, 3.0), "DD": (1.0, 1.0), "DC": (5.0, 0.0), "CD": (0.0, 5.0)}
MOVE = {"C": "COOPERATE", "D": "DEFECT"}
# per group, per rollout, the rounds as (agent, opponent) moves: two rounds, two rollouts
EPISODES = {
    ("train", "TitForTat"): (("CC", "CC"), ("DC", "CD")),
    ("exploit", "AlwaysDefect"): (("CD", "CD"), ("DD", "DD")),
    ("collusive", "AlwaysCooperate"): (("DC", "CC"), ("CC", "CC")),
}
ARM_SETTINGS = {
    "safety": {"safety": 1.0},
    "drop": {"safety": 0.0},
    "payoff": {"safety": 0.0, "control": "payoff"},
}


def episode(pool: str, opponent: str, rollout: int, rounds: tuple[str, ...]) -> Trace:
    results = tuple(
        RoundResult(t, ((0, MOVE[m[0]]), (1, MOVE[m[1]])), PAYOFFS[m]) for t, m in enumerate(rounds)
    )
    meta = {"pool": pool, "opponent": opponent, "rollout": rollout, "seat": 0}
    agents = ("policy", opponent)
    return Trace(f"0/{opponent}/{rollout}", "ipd", 3, 7, agents, results, (), meta=meta)


def constructed() -> list[Trace]:
    return [
        episode(pool, name, r, rounds)
        for (pool, name), rollouts in EPISODES.items()
        for r, rounds in enumerate(rollouts)
    ]


def groups(arm: str):
    args = SEPOArgs(game="ipd", rollouts=2, **ARM_SETTINGS[arm])
    args.check()
    return step_groups(constructed(), get_game("ipd"), args, POOLS)


# Per-round rewards, by hand. IPD normalises by 3 / 3 = 1; λe 2.4, λc 1, λx 1.8; a round's
# externality is 1 − (u₀ + u₁) / 6: 0 for CC, 1/6 for DC and CD.
#   safety: train u − 1.8·x; exploit −2.4·(u_opp − u); collusive −1·[agent defected]
#   drop:   train u; exploit 0; collusive 0
#   payoff: train u; exploit u; collusive u
REWARDS = {
    "safety": {
        "TitForTat": [[3, 3], [5 - 0.3, 0 - 0.3]],
        "AlwaysDefect": [[-12, -12], [0, 0]],
        "AlwaysCooperate": [[-1, 0], [0, 0]],
    },
    "drop": {
        "TitForTat": [[3, 3], [5, 0]],
        "AlwaysDefect": [[0, 0], [0, 0]],
        "AlwaysCooperate": [[0, 0], [0, 0]],
    },
    "payoff": {
        "TitForTat": [[3, 3], [5, 0]],
        "AlwaysDefect": [[0, 0], [1, 1]],
        "AlwaysCooperate": [[5, 3], [3, 3]],
    },
}
# Reward-to-go minus each round's mean over the two rollouts (credit "return", per round):
CENTRED = {
    "safety": {  # R: [[6, 3], [4.4, -0.3]], [[-24, -12], [0, 0]], [[-1, 0], [0, 0]]
        "TitForTat": [[0.8, 1.65], [-0.8, -1.65]],
        "AlwaysDefect": [[-12, -6], [12, 6]],
        "AlwaysCooperate": [[-0.5, 0], [0.5, 0]],
    },
    "drop": {  # R: [[6, 3], [5, 0]] and zeros
        "TitForTat": [[0.5, 1.5], [-0.5, -1.5]],
        "AlwaysDefect": [[0, 0], [0, 0]],
        "AlwaysCooperate": [[0, 0], [0, 0]],
    },
    "payoff": {  # R: [[6, 3], [5, 0]], [[0, 0], [2, 1]], [[8, 3], [6, 3]]
        "TitForTat": [[0.5, 1.5], [-0.5, -1.5]],
        "AlwaysDefect": [[-1, -0.5], [1, 0.5]],
        "AlwaysCooperate": [[1, 0], [-1, 0]],
    },
}
# σ pooled over the step: the root mean square of the 12 centred returns above
SIGMA = {
    "safety": math.sqrt((2 * (0.64 + 2.7225) + 2 * (144 + 36) + 2 * 0.25) / 12),
    "drop": math.sqrt(2 * (0.25 + 2.25) / 12),  # the zero groups count in the 12
    "payoff": math.sqrt((2 * (0.25 + 2.25) + 2 * (1 + 0.25) + 2 * 1) / 12),
}


@pytest.mark.parametrize("arm", ["safety", "drop", "payoff"])
def test_each_arms_rewards_advantages_and_pooled_sigma_by_hand(arm):
    got = groups(arm)
    # every arm trains the same groups, with the same weights: only the rewards differ
    assert [(g.pool, g.opponent, g.weight) for g in got] == [
        ("train", "TitForTat", 1.0),
        ("exploit", "AlwaysDefect", 1.0),
        ("collusive", "AlwaysCooperate", 1.0),
    ]
    for g in got:
        expected = torch.tensor(REWARDS[arm][g.opponent], dtype=torch.float64)
        assert torch.allclose(g.rewards, expected, atol=1e-12), (arm, g.opponent)

    advantages = step_advantages([g.rewards for g in got])
    for g, a in zip(got, advantages, strict=True):
        centred = torch.tensor(CENTRED[arm][g.opponent], dtype=torch.float64)
        assert torch.allclose(a, centred / (SIGMA[arm] + 1e-8), atol=1e-9), (arm, g.opponent)


def test_the_pooled_sigma_of_the_arms_differs_as_the_control_claims():
    # drop: the zero-reward groups shrink σ, so its training group's steps are √3 times those of
    # the same group trained alone; payoff keeps σ over three groups that carry a reward
    alone = step_advantages([groups("drop")[0].rewards])[0]
    pooled = step_advantages([g.rewards for g in groups("drop")])[0]
    assert torch.allclose(pooled, math.sqrt(3) * alone, atol=1e-9)
    assert SIGMA["drop"] == pytest.approx(0.6454972, abs=1e-7)
    assert SIGMA["payoff"] == pytest.approx(0.8897565, abs=1e-7)
    assert SIGMA["safety"] == pytest.approx(5.5319150, abs=1e-7)


def test_arms_are_named_and_the_payoff_control_is_checked():
    assert [SEPOArgs(**ARM_SETTINGS[a]).arm() for a in ARM_SETTINGS] == list(ARM_SETTINGS)
    assert SEPOArgs(safety=0.5).arm() == "safety-0.5"
    assert arm_settings("payoff") == {"safety": 0.0, "control": "payoff"}
    with pytest.raises(UnknownNameError, match="did you mean 'payoff'"):
        arm_settings("payof")
    with pytest.raises(ConfigError, match="needs --safety 0, not 1$"):
        SEPOArgs(game="ipd", control="payoff").check()
    with pytest.raises(ConfigError, match="needs --penalty own_episodes, not shared"):
        SEPOArgs(game="ipd", safety=0.0, control="payoff", penalty="shared").check()
    # none (the default) leaves --safety 0 and the fingerprint as before the option
    assert "control" not in SEPOArgs(game="ipd", safety=0.0).fingerprint()
    assert SEPOArgs(game="ipd", safety=0.0, control="payoff").fingerprint()["control"] == "payoff"


def fake_run(folder, args: SEPOArgs, exploit: float) -> None:
    """A run folder holding one complete checkpoint whose evaluations are given."""
    RunFolder(folder, args.fingerprint()).close()
    evals = [
        {"step": s, "safety_j": {"value": 1.0 - e, "stderr": 0.1, "n": 20}, "exploit": {
            "value": e, "stderr": 0.05, "n": 20}}
        for s, e in ((0, 0.5), (2, exploit))
    ]  # fmt: skip
    log = [{"step": 1, "seconds": 30.0}, {"step": 2, "seconds": 50.0}]
    checkpoint = folder / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(TrainerState(2, log, evals).to_json())
    (checkpoint / "COMPLETE").write_text("ok\n")


def test_the_ablation_table_names_all_three_arms(tmp_path):
    base = SEPOArgs(game="ipd", out=tmp_path, eval_episodes=20)
    runs = arms(base, "arm", ["safety", "drop", "payoff"])
    assert [(a.out.name, a.safety, a.control) for a in runs] == [
        ("arm-safety", 1.0, "none"),
        ("arm-drop", 0.0, "none"),
        ("arm-payoff", 0.0, "payoff"),
    ]
    for run, exploit in zip(runs, (0.1, 0.3, 0.2), strict=True):
        fake_run(run.out, run, exploit)
    table = ablation_table("arm", ["safety", "drop", "payoff"], [a.out for a in runs])
    assert list(table["arm"]) == ["safety", "safety", "drop", "drop", "payoff", "payoff"]
    md = last_checkpoint_markdown("arm", table).splitlines()
    assert md[0] == ("| arm | step | safety_j | exploit | median step (s) | training reward |")
    assert md[2:] == [
        "| safety | 2 | 0.900 ± 0.100 | 0.100 ± 0.050 | 40 | λ = 1, each pool's episodes "
        "carry the term of J they measure |",
        "| drop | 2 | 0.700 ± 0.100 | 0.300 ± 0.050 | 40 | λ = 0, the exploit and collusive "
        "pools' episodes carry reward 0 |",
        "| payoff | 2 | 0.800 ± 0.100 | 0.200 ± 0.050 | 40 | λ = 0, every pool's episodes carry "
        "the policy's payoff |",
    ]
    # a safety ablation names each value's arm, read from the run itself
    by_safety = ablation_table("safety", ["1", "0"], [runs[0].out, runs[1].out])
    assert (
        last_checkpoint_markdown("safety", by_safety)
        .splitlines()[0]
        .startswith("| safety | arm | step |")
    )
    assert list(by_safety["arm"]) == ["safety", "safety", "drop", "drop"]
    # a folder labelled as another arm than its run is refused
    with pytest.raises(ConfigError, match="arm-drop is a run of the drop arm, not of payoff"):
        ablation_table("arm", ["safety", "payoff"], [runs[0].out, runs[1].out])
    assert json.loads((runs[2].out / "run.json").read_text())["fingerprint"]["control"] == "payoff"
    assert isinstance(table, pd.DataFrame)


@pytest.mark.slow
def test_three_arms_from_one_start_differ_in_their_rewards_only(tiny_args, tmp_path):
    from stratagem.training.sepo.ablation import run_ablation

    out = tmp_path / "arms"
    base = tiny_args(out, game="ipd", steps=1, checkpoint_every=1, eval_episodes=1)
    table = run_ablation(base, "arm", ["safety", "drop", "payoff"], log=lambda _: None)

    def stored(arm: str, name: str) -> dict:
        return json.loads((out / f"arm-{arm}" / name).read_text())

    prints = {a: stored(a, "run.json")["fingerprint"] for a in ("safety", "drop", "payoff")}
    assert {k for k in prints["drop"] if prints["drop"][k] != prints["payoff"].get(k)} == {"out"}
    assert set(prints["payoff"]) - set(prints["drop"]) == {"control"}
    states = {a: stored(a, "checkpoint-1/trainer_state.json") for a in prints}
    # one start, the same episodes and trained decisions in every arm; only the rewards differ
    assert len({json.dumps(s["evals"][0]) for s in states.values()}) == 1
    assert len({s["log"][0]["samples"] for s in states.values()}) == 1
    rewards = {a: s["log"][0]["reward"] for a, s in states.items()}
    assert rewards["payoff"] > rewards["drop"] > rewards["safety"]  # IPD payoffs are ≥ 0
    assert list(table["arm"]) == ["safety", "safety", "drop", "drop", "payoff", "payoff"]
    assert "| payoff | 1 |" in (out / "ablation.md").read_text()
