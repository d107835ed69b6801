"""Self-play's contexts: `train selfplay --contexts FILE` plays its games on a DoND context file,
and evaluation contexts are held out from training by construction."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.games.dond import Context, all_contexts, split_contexts
from stratagem.strategies import get_strategy
from stratagem.training.selfplay import trainer as selfplay
from stratagem.training.selfplay.trainer import SelfPlayArgs


def mirror(ctx: Context) -> Context:
    return Context(ctx.counts, (ctx.values[1], ctx.values[0]))


def test_evaluation_contexts_are_disjoint_from_training_contexts():
    every = all_contexts()
    split = split_contexts(every, seed=0)
    train, held_out = set(split.train), set(split.held_out)
    assert not train & held_out
    assert train | held_out == set(every) and len(split.train) + len(split.held_out) == len(every)
    assert 0.08 < len(held_out) / len(every) < 0.12
    assert all(mirror(c) in held_out for c in held_out)  # no game seen from the other seat
    assert split_contexts(every, seed=0) == split  # seeded: the same split every run
    assert set(split_contexts(every, seed=1).held_out) != held_out


def scenario_set(specs) -> set[Context]:
    return {s.scenario for s in specs}


def test_self_play_games_train_and_evaluate_on_disjoint_contexts():
    agent = opponent = get_strategy("dond", "FairSplit")
    args = SelfPlayArgs(games=200, eval_games=100)
    split = split_contexts(all_contexts(), args.seed)
    trained = set()
    for iteration in (1, 2, 3):
        trained |= scenario_set(selfplay.game_specs("train", agent, agent, args, iteration))
    evaluated = scenario_set(selfplay.game_specs("selfplay", agent, agent, args, 1))
    evaluated |= scenario_set(selfplay.game_specs("fixed", agent, opponent, args, 1))
    assert len(trained) > 450 and len(evaluated) > 150
    assert not trained & evaluated  # today's overlap was 119 of 200
    assert trained <= set(split.train) and evaluated <= set(split.held_out)
    mirrored = {mirror(c) for c in evaluated}
    assert not trained & mirrored


def write_context_file(path, contexts) -> None:
    lines = []
    for ctx in contexts:
        for values in ctx.values:
            lines.append(" ".join(f"{n} {v}" for n, v in zip(ctx.counts, values, strict=True)))
    path.write_text("\n".join(lines) + "\n")


def test_a_context_file_is_what_self_play_plays_on(tmp_path):
    chosen = all_contexts()[::97]  # 60 contexts
    path = tmp_path / "contexts.txt"
    write_context_file(path, chosen)
    args = SelfPlayArgs(contexts=path, games=50, eval_games=20)
    args.check()
    assert selfplay.dond_game(args).contexts == tuple(chosen)
    agent = opponent = get_strategy("dond", "FairSplit")
    trained = scenario_set(selfplay.game_specs("train", agent, agent, args, 1))
    evaluated = scenario_set(selfplay.game_specs("fixed", agent, opponent, args, 1))
    assert trained <= set(chosen) and evaluated <= set(chosen)
    assert trained and evaluated and not trained & evaluated
    assert args.fingerprint()["contexts"] == str(path)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert args.fingerprint()["contexts_sha256"] == sha  # the content names the run, not the path
    with pytest.raises(ConfigError, match="--contexts: no file"):
        SelfPlayArgs(contexts=tmp_path / "missing.txt").check()
    write_context_file(path, chosen[:1])
    with pytest.raises(ConfigError, match="too few"):
        selfplay.game_specs("train", agent, agent, args, 1)


def test_train_selfplay_takes_contexts_on_the_command_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from stratagem.cli import train as cli

    path = tmp_path / "contexts.txt"
    write_context_file(path, all_contexts()[::97])
    seen = []
    monkeypatch.setattr(selfplay, "train_selfplay", lambda args, log: seen.append(args) or tmp_path)
    monkeypatch.setattr(cli, "_next_steps", lambda args, folder: [])
    result = CliRunner().invoke(
        cli._trainers(None), ["selfplay", "--contexts", str(path), "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    assert [a.contexts for a in seen] == [path]


def test_plays_per_context_play_each_context_in_a_row_each_game_its_own_seed():
    agent = get_strategy("dond", "FairSplit")
    args = SelfPlayArgs(games=12, plays_per_context=4)
    specs = selfplay.game_specs("train", agent, agent, args, iteration=1)
    contexts = [s.scenario for s in specs]
    assert [len(set(contexts[i : i + 4])) for i in (0, 4, 8)] == [1, 1, 1]
    assert len(set(contexts)) == 3  # three contexts, four plays each
    assert len({s.seed for s in specs}) == 12
    later = selfplay.game_specs("train", agent, agent, args, iteration=2)
    assert not {s.scenario for s in later} & set(contexts)  # each iteration draws afresh
    # one play per context: the games are the paper's, drawn as before the option existed
    paper = selfplay.game_specs("train", agent, agent, SelfPlayArgs(games=12), iteration=1)
    split = split_contexts(all_contexts(), 42)
    assert [s.scenario for s in paper] == [split.draw(False, s.seed) for s in paper]
    assert "plays_per_context" not in SelfPlayArgs().fingerprint()  # earlier runs resume
    assert SelfPlayArgs(plays_per_context=4).fingerprint()["plays_per_context"] == 4
    with pytest.raises(ConfigError, match="multiple of --plays-per-context"):
        SelfPlayArgs(games=10, plays_per_context=4).check()
    with pytest.raises(ConfigError, match="--plays-per-context must be at least 1"):
        SelfPlayArgs(plays_per_context=0).check()
    with pytest.raises(ConfigError, match="under --lam -1"):
        SelfPlayArgs(lam=-1.0, games=12, plays_per_context=4).check()


def test_demonstrations_on_a_context_file_follow_its_split_or_refuse_clearly(
    tmp_path, demonstrated_contexts
):
    """gen-sft --game dond -p contexts=FILE plays the file's training side; a file too small to
    hold a tenth out is a ConfigError naming why, before any chat is written."""
    from stratagem.training.sft import data as sft_data

    played = demonstrated_contexts
    chosen = all_contexts()[::97]
    path = tmp_path / "contexts.txt"
    write_context_file(path, chosen)
    params = {"contexts": str(path)}
    chats = list(sft_data.simulated_chats("dond", ["FairSplit"], 30, seed=42, params=params))
    split = split_contexts(chosen, 42)
    assert len(chats) == 60 and set(played) <= set(split.train) and len(set(played)) > 10
    write_context_file(path, chosen[:1])
    with pytest.raises(ConfigError, match="too few"):
        list(sft_data.simulated_chats("dond", ["FairSplit"], 2, seed=42, params=params))


def test_selection_games_draw_held_out_contexts_no_evaluation_game_uses():
    agent, opponent = get_strategy("dond", "FairSplit"), get_strategy("dond", "Cooperative")
    args = SelfPlayArgs(eval_games=100, select_games=60)
    split = split_contexts(all_contexts(), args.seed)
    evaluated = scenario_set(selfplay.game_specs("selfplay", agent, agent, args, 1))
    evaluated |= scenario_set(selfplay.game_specs("fixed", agent, opponent, args, 1))
    select = selfplay.game_specs("select", agent, opponent, args, 1)
    chosen = scenario_set(select)
    assert len(select) == 60 and len(chosen) > 50 and chosen <= set(split.held_out)
    assert not chosen & evaluated and not chosen & {mirror(c) for c in evaluated}
    assert all(s.agents == (agent, agent) for s in select)  # λ = 0: the self-play score
    evaluation_seeds = {s.seed for s in selfplay.game_specs("selfplay", agent, agent, args, 1)}
    assert not {s.seed for s in select} & evaluation_seeds
    assert args.selection == "select_score"
    # the same games every iteration, as the evaluation games
    assert [s.scenario for s in selfplay.game_specs("select", agent, opponent, args, 3)] == [
        s.scenario for s in select
    ]
    # under λ = -1 the selection follows the score against the fixed agent: so do its games
    zero_sum = SelfPlayArgs(lam=-1.0, eval_games=10, select_games=4)
    games = selfplay.game_specs("select", agent, opponent, zero_sum, 1)
    assert [s.agents for s in games] == [(agent, opponent), (opponent, agent)] * 2
    assert [s.meta["seat"] for s in games] == [0, 1, 0, 1]
    assert "select_games" not in SelfPlayArgs().fingerprint()  # earlier runs resume
    assert args.fingerprint()["select_games"] == 60
    assert SelfPlayArgs().selection == "selfplay_score"
    with pytest.raises(ConfigError, match="--select-games must be at least 0"):
        SelfPlayArgs(select_games=-1).check()


def test_selection_games_need_a_held_out_context_no_evaluation_game_uses(tmp_path, monkeypatch):
    chosen = all_contexts()[::97]  # 60 contexts: a handful held out
    path = tmp_path / "contexts.txt"
    write_context_file(path, chosen)
    args = SelfPlayArgs(contexts=path, eval_games=50, select_games=4, out=tmp_path / "run")
    held_out = split_contexts(chosen, args.seed).held_out
    with pytest.raises(ConfigError, match=f"all {len(held_out)} held-out contexts"):
        selfplay.game_specs("select", None, None, args, 1)  # type: ignore[arg-type]

    def load_policy(args):
        raise AssertionError("the model loaded")

    monkeypatch.setattr(selfplay, "load_policy", load_policy)
    with pytest.raises(ConfigError, match="--select-games: .* lower --eval-games"):
        selfplay.train_selfplay(args, log=lambda _: None)


def test_the_training_and_evaluation_games_are_those_of_runs_made_before_selection_games():
    """Old runs resume and are replayed (selfplay-eval) on exactly their games: the id, seed,
    seats, meta and context of every game of every phase, pinned."""
    a, b = get_strategy("dond", "FairSplit"), get_strategy("dond", "Cooperative")
    rows = []
    for args in (
        SelfPlayArgs(games=20, eval_games=10),
        SelfPlayArgs(games=12, eval_games=6, plays_per_context=4, lam=1.0, seed=7),
        SelfPlayArgs(games=4, eval_games=4, lam=-1.0),
    ):
        for phase in ("train", "selfplay", "fixed"):
            for iteration in (0, 1, 3):
                for s in selfplay.game_specs(phase, a, b, args, iteration):
                    agents = [x.name for x in s.agents]
                    rows.append([s.episode_id, s.seed, agents, s.meta, s.scenario.to_dict()])
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    assert len(rows) == 228
    assert digest == "1ff0599f3a9a1f523464c5a38a5ef5176f13b38f93df5eb0a86750d81eefb7c3"


@pytest.mark.parametrize(("seed", "select", "redrawn"), [(0, 48, (9, 11)), (43, 24, (3, 3))])
def test_replayed_games_are_a_plain_runs_but_those_on_its_selection_contexts(seed, select, redrawn):
    """``selfplay-eval --games 96`` of a run with ``--select-games`` plays the games of the same
    run without it, except those on a selection context (or its mirror): only those are drawn
    again, by their own seed, and none of them lands on one."""
    from stratagem.training.selfplay.evaluate import _phase_specs, redrawn_count

    agent, fixed = get_strategy("dond", "FairSplit"), get_strategy("dond", "Cooperative")
    run = SelfPlayArgs(eval_games=24, select_games=select, seed=seed)
    split = split_contexts(all_contexts(), seed)
    chosen = scenario_set(selfplay.game_specs("select", agent, fixed, run, 0))
    chosen |= {mirror(c) for c in chosen}
    replay = dataclasses.replace(run, eval_games=96)  # selfplay-eval --games 96
    plain = dataclasses.replace(replay, select_games=0)  # the same run without --select-games
    for phase, count in zip(("selfplay", "fixed"), redrawn, strict=True):
        games = _phase_specs(phase, agent, fixed, replay, 2, split, own=24)
        without = _phase_specs(phase, agent, fixed, plain, 2, split, own=24)
        assert [s.episode_id for s in games] == [s.episode_id for s in without]
        assert [(s.seed, s.agents) for s in games] == [(s.seed, s.agents) for s in without]
        moved = [
            k
            for k, (a, b) in enumerate(zip(games, without, strict=True))
            if a.scenario != b.scenario
        ]
        assert moved == [k for k, s in enumerate(without) if s.scenario in chosen]
        assert moved == [k for k, s in enumerate(games) if s.meta.get("redrawn")]
        assert len(moved) == redrawn_count(games) == count and min(moved) >= 24
        assert not scenario_set(games) & chosen and scenario_set(games) <= set(split.held_out)
        for k in range(96):  # the rest: the plain run's games, meta and all
            if k not in moved:
                assert games[k] == without[k]


def test_partner_games_play_the_fixed_agent_on_training_contexts_alternating_seats():
    agent, opponent = get_strategy("dond", "FairSplit"), get_strategy("dond", "Cooperative")
    args = SelfPlayArgs(games=40, partner_games=40, eval_games=100)
    split = split_contexts(all_contexts(), args.seed)
    partner = selfplay.game_specs("partner", agent, opponent, args, 1)
    assert len(partner) == 40
    assert [s.agents for s in partner[:4]] == [(agent, opponent), (opponent, agent)] * 2
    assert [s.meta["seat"] for s in partner[:4]] == [0, 1, 0, 1]
    assert {s.meta["phase"] for s in partner} == {"partner"}
    assert scenario_set(partner) <= set(split.train)  # trained on: never a held-out context
    evaluated = scenario_set(selfplay.game_specs("fixed", agent, opponent, args, 1))
    assert not scenario_set(partner) & (evaluated | {mirror(c) for c in evaluated})
    train = selfplay.game_specs("train", agent, agent, args, 1)
    assert not {s.seed for s in partner} & {s.seed for s in train}  # a stream of their own
    assert not {s.episode_id for s in partner} & {s.episode_id for s in train}
    later = selfplay.game_specs("partner", agent, opponent, args, 2)
    assert [s.seed for s in later] != [s.seed for s in partner]  # fresh games every iteration
    assert selfplay.game_specs("partner", agent, opponent, SelfPlayArgs(), 1) == []
    assert "partner_games" not in SelfPlayArgs().fingerprint()  # earlier runs resume
    assert "min_of_best" not in SelfPlayArgs().fingerprint()
    assert SelfPlayArgs(min_of_best=0.8).fingerprint()["min_of_best"] == 0.8
    assert args.fingerprint()["partner_games"] == 40
    with pytest.raises(ConfigError, match="--partner-games must be at least 0"):
        SelfPlayArgs(partner_games=-1).check()
    with pytest.raises(ConfigError, match="--partner names the agent of --partner-games"):
        SelfPlayArgs(partner="Cooperative").check()
    with pytest.raises(UnknownNameError, match="Cooprative"):
        SelfPlayArgs(partner_games=2, partner="Cooprative").check()
    assert "partner" not in args.fingerprint()
    assert SelfPlayArgs(partner_games=2, partner="Cooperative").fingerprint()["partner"] == (
        "Cooperative"
    )
