"""Live steered dialogues (seed 003 §4): the saved MLP loads and steers, the CFR policy steers at
the matching information set, and the elected-steered meta-game comes from live games."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from typer.testing import CliRunner

from stratagem.backends.cache import CachedBackend
from stratagem.backends.scripted import ScriptedBackend
from stratagem.cli.main import app
from stratagem.errors import ConfigError
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import live
from stratagem.solvers.dialogue import setup as dialogue_setup
from stratagem.training import imitation

from .conftest import SeededScript, meeting_script
from .test_failures import Flaky, accept
from .test_imitation import fake_embed


@dataclass
class Always:
    """A steering policy that always pushes one instruction."""

    pick: str
    name: str = "always"

    @property
    def instructions(self):
        return (self.pick,)

    def distributions(self, states):
        return [{self.pick: 1.0} for _ in states]


def test_an_instruction_is_drawn_by_the_inverse_of_the_cumulative_distribution():
    dist = {"Monday": 0.25, "never": 0.0, "Tuesday": 0.75}
    assert [live.draw(dist, u) for u in (0.0, 0.2, 0.25, 0.3, 0.999)] == [
        "Monday",
        "Monday",
        "Tuesday",
        "Tuesday",
        "Tuesday",
    ]


def test_the_saved_mlp_round_trips_with_everything_it_needs(tmp_path):
    # regression: mlp.pt was a bare state dict: no instructions, embedder or layer widths
    data = imitation.Dataset(("calm", "any"), ["a b", "c d"], [[1, 0], [0, 1]])
    data.embeddings = fake_embed(data.texts)
    model, _ = imitation.train(data, imitation.Args(hidden=8, steps=20))
    path = tmp_path / "mlp.pt"
    imitation.save_policy(path, model, data.instructions, game="fruit", train_scenarios=3)
    policy = imitation.load_policy(path, fake_embed)
    assert policy.instructions == ("calm", "any") and policy.layers == (64, 8, 8, 2)
    assert policy.embedding_model == "all-MiniLM-L6-v2"
    assert policy.meta == {"game": "fruit", "train_scenarios": 3}
    x = torch.as_tensor(fake_embed(["some state"]))
    assert torch.equal(policy.model(x), model(x))
    stored = torch.load(path, weights_only=True)  # plain data: no pickled code
    assert stored["layers"] == [64, 8, 8, 2] and stored["instructions"] == ["calm", "any"]

    @dataclass
    class State:
        text: str

        def observation(self):
            return self.text

    (dist,) = policy.distributions([State("some state")])
    probs = torch.softmax(model(x), -1)[0].detach()
    assert dist == pytest.approx({"calm": float(probs[0]), "any": float(probs[1])})
    torch.save(model.state_dict(), tmp_path / "old.pt")
    with pytest.raises(ConfigError, match="run `stratagem imitate`"):
        imitation.load_policy(tmp_path / "old.pt", fake_embed)
    with pytest.raises(ConfigError, match="no such file"):
        imitation.load_policy(tmp_path / "none.pt", fake_embed)


def test_the_live_meta_game_on_the_hand_scenario(hand_scenario):
    # the hand-computed meeting game of test_tree.py with one LLM seed: the steered seat always
    # pushes Tuesday, the unsteered one says "any" (Bob then accepts Monday)
    domain = get_domain("meeting", ("Monday", "Tuesday", "any"))
    backend = CachedBackend(SeededScript(meeting_script, seeds=1))
    played, meta = live.steered_meta_game(
        domain, [hand_scenario], backend, Always("Tuesday"), games=3, seeds=1
    )
    assert meta is not None and meta.scenarios == 1 and meta.games == 3
    assert meta.row == ((4.0, 8.0), (0.0, 8.0))
    assert meta.col == ((6.0, 2.0), (0.0, 2.0))
    assert sum(map(sum, meta.joint)) == pytest.approx(1.0)
    assert len(played) == 12
    by_cell = {tuple(d.cell): d for d in played}
    assert by_cell[0, 0].instructions == ["Tuesday", "Tuesday"]
    assert by_cell[1, 0].instructions == ["Tuesday", "any"]
    assert by_cell[0, 1].instructions == ["any"] and by_cell[0, 1].row()["payoffs"] == [8.0, 2.0]
    calls = list(backend.backend.calls)
    again = CachedBackend(backend.backend)
    again.memory = backend.memory
    assert (
        live.steered_meta_game(domain, [hand_scenario], again, Always("Tuesday"), games=3, seeds=1)[
            1
        ]
        == meta
    )
    assert backend.backend.calls == calls  # every message from the cache


def test_cfr_steers_at_the_matching_information_set_with_no_new_model_call(hand_scenario):
    domain = get_domain("meeting", ("Monday", "Tuesday", "any"))
    backend = CachedBackend(SeededScript(meeting_script, seeds=2))
    steer = live.cfr_steer(domain, [hand_scenario], backend, 2000)
    expanded = list(backend.backend.calls)
    played, meta = live.steered_meta_game(domain, [hand_scenario], backend, steer, games=8)
    assert backend.backend.calls == expanded  # the live messages are the tree's, cached
    assert steer.off_tree == 0
    steered = [x for d in played for s, x in enumerate(d.instructions) if d.cell[(1 + s) % 2] == 0]
    assert steered and set(steered) == {"Tuesday"}  # the hand game's equilibrium
    assert meta is not None and meta.row[0][0] == 4.0 and meta.col[0][0] == 6.0
    assert {d.seeds[0] for d in played} == {0, 1}  # chance draws both LLM seeds


def test_a_failed_generation_leaves_no_payoff_and_names_the_scenario():
    domain = get_domain("fruit", ("calm", "any"))
    backend = CachedBackend(Flaky(accept, up=False))
    scenario = domain.scenario(5)
    played, meta = live.steered_meta_game(domain, [scenario], backend, Always("calm"), games=1)
    assert meta is None and all(d.row()["payoffs"] is None for d in played)
    assert all("connection refused" in d.row()["error"] for d in played)
    with pytest.raises(live.UnsolvedScenarios, match="fruit-5: generation failed"):
        live.check_played(played)
    assert backend.memory == {}  # nothing cached: a rerun retries


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result


def test_dialogue_command_steers_live_with_a_saved_mlp_and_with_cfr(monkeypatch, tmp_path):
    backend = ScriptedBackend(lambda chat: accept(chat) + f" ({len(chat)})")
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: backend)
    monkeypatch.setattr(imitation, "load_embedder", lambda: fake_embed)
    common = ["--game", "fruit", "--seeds", "1", "--cache", tmp_path / "c.sqlite"]
    trained = run(
        "imitate", *common, "--instructions", "calm,assertive,any", "--train", "3", "--test",
        "1", "--steps", "50", "--iterations", "100", "--out", tmp_path / "imitate",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    mlp = tmp_path / "imitate" / "mlp.pt"
    out = tmp_path / "live"
    result = run("dialogue", *common, "--steer", mlp, "--scenarios", "2", "--games", "2", "-o", out)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "dialogues.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 2 * 2  # cells × scenarios × games
    assert {r["scenario"] for r in rows} == {"fruit-" + str(s) for s in _seeds(tmp_path, 3, 2)}
    assert {tuple(r["policies"]) for r in rows} == {
        ("mlp", "mlp"),
        ("mlp", "unsteered"),
        ("unsteered", "mlp"),
        ("unsteered", "unsteered"),
    }
    meta = json.loads((out / "meta_game.json").read_text())
    # the unsteered LLM says "any", which never accepts here: no trade, 0 for both
    assert meta["row"][1][1] == 0.0 and meta["col"][1][1] == 0.0
    for i in (0, 1):
        for j in (0, 1):
            cell = [r for r in rows if r["cell"] == [live.CELLS[i], live.CELLS[j]]]
            mean = sum(r["payoffs"][0] for r in cell) / len(cell)
            assert meta["row"][i][j] == pytest.approx(mean)
    steered = [
        x
        for r in rows
        for s, x in enumerate(r["instructions"])
        if r["cell"][(1 + s) % 2] == "steered"
    ]
    assert set(steered) <= {"calm", "assertive", "any"} and steered
    flat = len({v for r in meta["row"] for v in r}) == len({v for r in meta["col"] for v in r}) == 1
    assert ("only breaks a tie" in (out / "table.md").read_text()) == flat
    before = (out / "dialogues.jsonl").read_bytes()
    again = run("dialogue", *common, "--steer", mlp, "--scenarios", "2", "--games", "2", "-o", out)
    assert again.exit_code == 0 and (out / "dialogues.jsonl").read_bytes() == before
    assert json.loads((out / "summary.json").read_text())["usage"]["calls"] == 0  # all cached
    cfr = run("dialogue", *common, "--instructions", "calm,assertive,any", "--steer", "cfr",
              "--scenarios", "2", "--games", "2", "-o", tmp_path / "cfr")  # fmt: skip
    assert cfr.exit_code == 0, cfr.output
    summary = json.loads((tmp_path / "cfr" / "summary.json").read_text())
    assert summary["off_tree_turns"] == 0 and summary["steer"] == "cfr"
    wrong = run("dialogue", *common, "--instructions", "calm,any", "--steer", mlp, "-o", out)
    assert isinstance(wrong.exception, ConfigError)
    assert "the MLP steers with" in str(wrong.exception)


def _seeds(tmp_path, offset, count):
    from stratagem.seeding import derive

    return [derive(0, "fruit", i) for i in range(offset, offset + count)]
