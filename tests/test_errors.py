"""Errored episodes are recorded, counted and retried on rerun (RELIABILITY A4)."""

from __future__ import annotations

import json

from stratagem.agents.llm import LLMAgent
from stratagem.backends.base import Generation
from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.seeding import derive


class FlakyBackend:
    """Fails about 5% of decisions (chosen by a hash of the decision seed), so about a quarter
    of six-round episodes end in an error."""

    model_id = "flaky"

    def __init__(self, failing: bool):
        self.failing = failing

    def generate(self, chats, sampling, *, seeds=None, stop=None):
        out = []
        for seed in seeds:
            if self.failing and derive(0, seed) % 20 == 0:
                out.append(
                    Generation(
                        "",
                        finish_reason="error",
                        info={"error": "HTTP 503 after 3 attempts", "http_status": 503},
                    )
                )
            else:
                out.append(Generation("DEFECT", tokens=1))
        return out

    def choice_probs(self, chats, choices):
        return [{c: 1 / len(cs) for c in cs} for cs in choices]


def test_errors_are_recorded_then_retried(tmp_path):
    game = get_game("auction")  # the private value makes first prompts differ across seeds
    out = tmp_path / "run"
    first = evaluate(game, LLMAgent(FlakyBackend(True), game), episodes=20, out=out)
    statuses = [t.status for t in first.traces]
    n_err = statuses.count("error")
    assert 0 < n_err < len(statuses)
    assert first.errors == n_err
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["status"] == "partial" and manifest["errors"] == n_err
    error_trace = next(t for t in first.traces if t.status == "error")
    assert "503" in error_trace.error
    # metrics use complete episodes only
    assert (
        first.metrics["pay"].n
        + first.metrics["exploit"].n
        + first.metrics["robust"].n
        + first.metrics["collusion"].n
        == len(statuses) - n_err
    )

    second = evaluate(game, LLMAgent(FlakyBackend(False), game), episodes=20, out=out)
    assert second.errors == 0
    ids = [t.episode_id for t in second.traces]
    assert len(ids) == len(set(ids)) == 160
    assert all(t.status == "complete" for t in second.traces)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
