"""The penalty ablation's table says which modes' penalties follow the rollout's own actions
(``per_rollout``'s exploit and collusion come from independent auxiliary episodes)."""

from __future__ import annotations

from stratagem.training.checkpoints import TrainerState
from stratagem.training.sepo.ablation import ablation_table, last_checkpoint_markdown

MODES = ["shared", "per_rollout", "own_episodes"]


def fake_arm(folder, score: float) -> None:
    state = TrainerState(step=2, log=[{"step": 1, "seconds": 3.0}, {"step": 2, "seconds": 5.0}])
    metrics = ("safety_j", "pay", "exploit", "collusion", "nra")
    state.evals = [
        {"step": 2, **{m: {"value": score, "stderr": 0.1, "n": 4} for m in metrics}},
    ]
    checkpoint = folder / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(state.to_json())
    (checkpoint / "COMPLETE").write_text("ok\n")


def test_the_penalty_table_says_whether_the_penalty_follows_the_rollouts_actions(tmp_path):
    folders = [tmp_path / f"penalty-{m}" for m in MODES]
    for i, folder in enumerate(folders):
        fake_arm(folder, float(i))
    table = ablation_table("penalty", MODES, folders)
    assert list(table["penalty_follows_actions"]) == ["no", "x only", "yes"]
    md = last_checkpoint_markdown("penalty", table).splitlines()
    assert md[0].startswith("| penalty | step | safety_j")
    assert md[0].endswith("| penalty follows own actions |") and len(md) == 2 + len(MODES)
    assert md[4].endswith("| yes |") and md[3].endswith("| x only |")
    other = ablation_table("credit", ["return", "immediate"], folders[:2])
    assert "penalty_follows_actions" not in other
    assert "own actions" not in last_checkpoint_markdown("credit", other)
