"""Deal or No Deal metrics from traces (SPEC §7), and the eval / tournament commands."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys

import pytest

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.games import get_game
from stratagem.games.dond import (
    Context,
    DondState,
    complement,
    divisions,
    joint_values,
    score,
)
from stratagem.metrics.dond import (
    accepted,
    by_iteration,
    dond_metrics,
    first_speaker_share,
    is_joint_best,
    is_pareto,
    pareto_optimal,
    vocabulary_size,
)
from stratagem.metrics.registry import game_metrics

# counts 2 books, 2 hats, 1 ball; seat 0 values (1, 2, 4), seat 1 values (3, 2, 0)
CTX = Context((2, 2, 1), ((1, 2, 4), (3, 2, 0)))
SEED0 = next(s for s in itertools.count() if DondState(CTX, s).first == 0)


def episode(texts, *, lam=0.0, meta=None, episode_id="e"):
    """Plays ``texts`` in order (seat 0 speaks first) as model answers; each answer's tokens are
    its word count."""
    game = get_game("dond", lam=lam)
    ep = Episode(game, episode_id, SEED0, ("a", "b"), meta=meta, scenario=CTX.to_dict())
    for text in texts:
        (obs,) = ep.waiting()
        ep.submit(obs.seat, Decision(game.parse(text), text=text, tokens=len(text.split())))
        ep.step()
    assert ep.done
    return ep.trace()


DEAL = ["[message] hi there", "[propose] (2 books, 0 hats, 0 balls)", "[propose] (0, 2, 1)"]
NOT_PARETO = ["[message] hi", "[propose] (0 books, 2 hats, 0 balls)", "[propose] (2, 0, 1)"]
NO_DEAL = ["[message] hi", "[propose] (2 books, 2 hats, 0 balls)", "[propose] (2, 0, 1)"]


def test_pareto_uses_each_seats_own_values():
    """Regression: a peer implementation scored both seats with seat 0's values. Under one shared
    value function every division sums to 10, so every division looked Pareto-optimal."""
    counts, values = CTX.counts, CTX.values
    # seat 0 keeps (2, 0, 1): 6 to it, seat 1 gets 2 hats: 4 to it; (0, 1, 1) gives (6, 8)
    assert not pareto_optimal(counts, values, (2, 0, 1))
    assert pareto_optimal(counts, (values[0], values[0]), (2, 0, 1))  # the bug's verdict
    # seat 0 keeps (0, 2, 1): (8, 6) — nothing gives both as much and one more
    assert pareto_optimal(counts, values, (0, 2, 1))
    assert pareto_optimal(counts, values, (2, 2, 1))  # 10 for seat 0: nobody can do better
    assert not pareto_optimal(counts, values, (0, 0, 0))  # (0, 10) is beaten by (4, 10)


def test_pareto_matches_a_naive_check_on_every_division():
    counts, values = CTX.counts, CTX.values

    def outcome(d):
        return score(values[0], d), score(values[1], complement(counts, d))

    outcomes = [outcome(d) for d in divisions(counts)]
    for d in divisions(counts):
        r = outcome(d)
        dominated = any(o[0] >= r[0] and o[1] >= r[1] and o != r for o in outcomes)
        assert pareto_optimal(counts, values, d) == (not dominated), d


def test_joint_best_is_the_highest_sum_of_both_seats_own_values_not_pareto():
    counts, values = CTX.counts, CTX.values
    joint = joint_values(counts, values)
    naive = {
        d: score(values[0], d) + score(values[1], complement(counts, d)) for d in divisions(counts)
    }
    assert joint == naive and max(joint.values()) == 14
    assert joint_values(counts, values, seat=1)[(2, 0, 0)] == 14  # seat 1 keeping the books
    everything = ["[message] hi", "[propose] (0 books, 0 hats, 0 balls)", "[propose] (2, 2, 1)"]
    greedy = episode(everything)  # Pareto-optimal (10 for seat 0), joint value 10
    assert is_pareto(greedy) and not is_joint_best(greedy)
    assert is_joint_best(episode(DEAL)) and not is_joint_best(episode(NO_DEAL))
    assert not is_joint_best(episode(NOT_PARETO))


def test_scores_agreement_and_pareto_rates():
    traces = [
        episode(DEAL, episode_id="1"),
        episode(NOT_PARETO, episode_id="2"),
        episode(NO_DEAL, episode_id="3"),
    ]
    m = dond_metrics(traces)
    assert m["item_score"].value == pytest.approx((8 + 6 + 0) / 3)
    assert m["opponent_item_score"].value == pytest.approx((6 + 4 + 0) / 3)
    assert m["score"].value == pytest.approx(m["item_score"].value)  # λ = 0
    assert m["agreement_rate"].value == pytest.approx(2 / 3) and m["agreement_rate"].n == 3
    assert m["pareto_rate"].value == pytest.approx(1 / 3)
    assert m["pareto_rate_agreed"].value == pytest.approx(1 / 2) and m["pareto_rate_agreed"].n == 2
    # the highest joint value is 14 (books to seat 1, the ball to seat 0): DEAL's 8 + 6
    assert m["joint_best_rate"].value == pytest.approx(1 / 3) and m["joint_best_rate"].n == 3
    assert m["abort_rate"].value == 0.0
    assert all(e.stderr >= 0 for e in m.values())


@pytest.mark.parametrize("lam", [-1.0, 0.0, 1.0])
def test_objective_scores_follow_lambda_and_the_agent_seat(lam):
    t = episode(DEAL, lam=lam)
    assert dond_metrics([t])["score"].value == pytest.approx(8 + lam * 6)
    assert dond_metrics([t])["opponent_score"].value == pytest.approx(6 + lam * 8)
    other = dataclasses.replace(t, meta={"seat": 1})
    assert dond_metrics([other])["score"].value == pytest.approx(6 + lam * 8)
    assert dond_metrics([other])["item_score"].value == 6


def test_both_seats_average_within_the_episode():
    m = dond_metrics([episode(DEAL)], both_seats=True)
    assert m["item_score"].value == pytest.approx(7.0) and m["item_score"].n == 1
    assert m["opponent_item_score"].value == pytest.approx(7.0)


def test_corrections_aborts_and_dialogue_length():
    faulty = ["no prefix", "[message] hi there", "[propose] (2, 0, 0)", "[message] x"]
    faulty.append("[propose] (0, 2, 1)")
    t = episode(faulty)
    assert accepted(t) == [False, True, True, False, True]
    m = dond_metrics([t])
    assert m["correction_rate"].value == pytest.approx(2 / 4)  # seat 0 answered 4 times
    assert m["dialogue_turns"].value == 3
    # "hi there" (2) + "(2 books, 0 hats, 0 balls)" (6) + "(0 books, 2 hats, 1 balls)" (6)
    assert m["dialogue_words"].value == 14
    assert m["dialogue_tokens"].value == 3 + 4 + 4  # the accepted answers' tokens only
    aborted = episode(["x"] * 5)
    assert aborted.rounds[0].info["aborted"]
    m = dond_metrics([aborted, t])
    assert m["abort_rate"].value == pytest.approx(0.5)
    assert accepted(aborted) == [False] * 5


def said(message):
    return [f"[message] {message}", "[propose] (2, 0, 0)", "[propose] (0, 2, 1)"]


def test_vocabulary_counts_distinct_words_with_a_jackknife_error():
    a = episode(said("Hello hello books"), episode_id="a")
    b = episode(said("books please"), episode_id="b")
    v = vocabulary_size([a, b])
    assert v.value == 3 and v.n == 2  # hello, books, please
    # leaving a out: {books, please} = 2; leaving b out: {hello, books} = 2
    assert v.stderr == 0.0
    c = episode(said("zebra"), episode_id="c")
    v = vocabulary_size([a, c])
    # leaving a out: {zebra} = 1; leaving c out: {hello, books} = 2
    assert v.value == 3 and v.stderr == pytest.approx((1 / 2 * (0.25 + 0.25)) ** 0.5)
    assert vocabulary_size([a]).value == 2 and vocabulary_size([a]).stderr == 0.0
    assert vocabulary_size([dataclasses.replace(a, meta={"seat": 1})]).value == 0  # no message


def test_error_traces_are_left_out_and_iterations_grouped():
    good = episode(DEAL, meta={"iteration": 0}, episode_id="1")
    late = episode(NO_DEAL, meta={"iteration": 1}, episode_id="2")
    broken = dataclasses.replace(good, status="error", episode_id="3")
    assert dond_metrics([good, broken])["agreement_rate"].n == 1
    per = by_iteration([good, late, broken])
    assert list(per) == [0, 1]
    assert per[0]["agreement_rate"].value == 1.0 and per[1]["agreement_rate"].value == 0.0


def test_the_game_registers_its_metrics():
    game = get_game("dond")
    own = game_metrics(game.name)
    assert own is not None
    assert set(own([episode(DEAL)])) == set(dond_metrics([episode(DEAL)]))


def stratagem(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", *args], capture_output=True, text=True, cwd=cwd
    )


def test_eval_prints_the_dond_metrics(tmp_path):
    r = stratagem(
        "eval", "-g", "dond", "-a", "strategy:Cooperative", "-n", "2", "-p", "objective=coop",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    for key in ("score", "agreement_rate", "pareto_rate_agreed", "vocabulary_size", "abort_rate"):
        assert key in r.stdout, key


def test_tournament_plays_every_pairing_with_self_play(tmp_path):
    r = stratagem(
        "tournament", "-g", "dond", "-a", "FairSplit,Stubborn", "-n", "2", "-o", "t", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert "8 episodes" in r.stdout
    # the DoND report (report.dond), not mean payoff only: one row per pairing
    assert "Deal or No Deal round robin" in r.stdout and "Pareto" in r.stdout
    assert (tmp_path / "t" / "summary.csv").read_text().startswith("seat0,seat1,episodes,")


def test_first_speaker_share_is_what_the_opener_keeps_of_its_pool_value():
    # seat 0 opens every episode and keeps (0, 2, 1), then (2, 0, 1): 8 and 6 of its
    # 2·1 + 2·2 + 1·4 = 10; without a deal it keeps nothing
    traces = [episode(DEAL), episode(NOT_PARETO), episode(NO_DEAL)]
    assert [first_speaker_share([t]).value for t in traces] == [0.8, 0.6, 0.0]
    assert first_speaker_share(traces).value == pytest.approx(1.4 / 3)
    assert dond_metrics(traces)["first_speaker_share"].n == 3


def test_first_speaker_share_follows_the_seat_that_opened():
    seed1 = next(s for s in itertools.count() if DondState(CTX, s).first == 1)
    game = get_game("dond")
    ep = Episode(game, "e1", seed1, ("a", "b"), scenario=CTX.to_dict())
    # seat 1 opens and keeps (2, 0, 0): 6 of its 2·3 + 2·2 + 1·0 = 10; seat 0 keeps the rest
    for text in ["[message] hi", "[propose] (0 books, 2 hats, 1 balls)", "[propose] (2, 0, 0)"]:
        (obs,) = ep.waiting()
        ep.submit(obs.seat, Decision(game.parse(text), text=text))
        ep.step()
    trace = ep.trace()
    assert trace.rounds[-1].info["first"] == 1
    assert first_speaker_share([trace]).value == 0.6
