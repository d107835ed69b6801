"""Filtered-BC self-play: the kept set, the loss masks of a seat's chat, early stopping, and one
run end to end on a tiny random LM (resume after a kill equals an uninterrupted run)."""

from __future__ import annotations

import dataclasses
import gc
import json
import shutil

import pytest
import torch

from stratagem.agent import Decision
from stratagem.backends.hf import HFBackend
from stratagem.episode import Episode
from stratagem.errors import ConfigError, UnknownNameError
from stratagem.game import RoundResult
from stratagem.games import get_game
from stratagem.games.dond import Context, complement, render_share
from stratagem.seeding import derive
from stratagem.settings import field_docs
from stratagem.strategies import get_strategy
from stratagem.trace import Trace, TraceWriter, read_traces
from stratagem.training.selfplay import data as selfplay_data
from stratagem.training.selfplay import trainer as selfplay
from stratagem.training.selfplay.data import (
    best_objective,
    kept_and_counts,
    kept_partner_seats,
    kept_seats,
    label_runs,
    play_games,
    play_groups,
    seat_chat,
    seat_tokens,
    stalled,
)
from stratagem.training.selfplay.trainer import SelfPlayArgs, train_selfplay
from stratagem.training.trl_config import IGNORE

END = "<|im_end|>\n"  # how SmolLM2's template closes a turn


def result_trace(
    episode_id: str, payoffs, agreement: bool, status: str = "complete", context=None, lam=1.0
) -> Trace:
    info: dict = {"agreement": agreement}
    if context is not None:  # as the game's final info records it
        info.update(counts=list(context.counts), values=[list(v) for v in context.values], lam=lam)
    return Trace(
        episode_id=episode_id,
        game="dond",
        version=1,
        seed=0,
        agents=("m", "m"),
        rounds=(RoundResult(0, (), payoffs, info),),
        decisions=(),
        status=status,  # type: ignore[arg-type]
        scenario={} if context is None else context.to_dict(),
    )


def test_kept_seats_are_those_above_the_mean():
    a = result_trace("a", (6.0, 3.0), True)
    b = result_trace("b", (0.0, 0.0), False)
    c = result_trace("c", (9.0, 0.0), True)
    broken = result_trace("x", (10.0, 10.0), True, status="error")  # not in the mean
    # the mean of the six seat scores of a, b and c is 18 / 6 = 3: seat 1 of a is not above it
    kept = kept_seats([a, b, broken, c], lam=0.0)
    assert [(t.episode_id, s) for t, s in kept] == [("a", 0), ("c", 0)]


def test_zero_sum_also_keeps_zero_score_agreements():
    won = result_trace("won", (3.0, -3.0), True)
    tied = result_trace("tied", (0.0, 0.0), True)
    failed = result_trace("failed", (0.0, 0.0), False)
    kept = kept_seats([won, tied, failed], lam=-1.0)
    assert [(t.episode_id, s) for t, s in kept] == [("won", 0), ("tied", 0), ("tied", 1)]
    assert [(t.episode_id, s) for t, s in kept_seats([won, tied, failed], lam=0.0)] == [("won", 0)]


def test_a_per_context_baseline_keeps_the_better_plays_of_every_context():
    """A rich context (joint value 16 or 12) and a poor one (8 or 4), two plays each, λ = 1 (both
    seats score the joint value): the iteration's mean (10) keeps both rich plays and neither
    poor one; each context's own mean keeps the better play of each."""
    rich = Context((1, 2, 3), ((1, 3, 1), (4, 0, 2)))
    poor = Context((1, 1, 1), ((2, 3, 5), (5, 3, 2)))
    games = [
        result_trace("rich-a", (16.0, 16.0), True, context=rich),
        result_trace("rich-b", (12.0, 12.0), True, context=rich),
        result_trace("poor-a", (8.0, 8.0), True, context=poor),
        result_trace("poor-b", (4.0, 4.0), True, context=poor),
    ]
    kept = {t.episode_id for t, _ in kept_seats(games, lam=1.0)}
    assert kept == {"rich-a", "rich-b"}
    kept = [(t.episode_id, s) for t, s in kept_seats(games, lam=1.0, per_context=True)]
    assert kept == [("rich-a", 0), ("rich-a", 1), ("poor-a", 0), ("poor-a", 1)]
    with pytest.raises(ValueError, match="nocontext: the trace records no context"):
        kept_seats([*games, result_trace("nocontext", (1.0, 1.0), True)], 1.0, per_context=True)


def test_partner_games_keep_the_policys_seat_above_its_own_mean():
    """Against the fixed agent only the policy's seat (meta "seat") counts: its scores are 6, 2
    and 7 (mean 5), whatever the fixed agent scored; an errored game is out of the mean."""
    games = [
        dataclasses.replace(result_trace("a", (6.0, 9.0), True), meta={"seat": 0}),
        dataclasses.replace(result_trace("b", (9.0, 2.0), True), meta={"seat": 1}),
        dataclasses.replace(result_trace("x", (10.0, 10.0), True, "error"), meta={"seat": 0}),
        dataclasses.replace(result_trace("c", (0.0, 7.0), True), meta={"seat": 1}),
    ]
    kept = kept_partner_seats(games)
    assert [(t.episode_id, s) for t, s in kept] == [("a", 0), ("c", 1)]
    assert kept_partner_seats([]) == []
    tied = [dataclasses.replace(result_trace(i, (3.0, 3.0), True), meta={"seat": 0}) for i in "pq"]
    assert kept_partner_seats(tied) == []  # strictly above, as the self-play filter
    with pytest.raises(ValueError, match="a: the trace does not say which seat"):
        kept_partner_seats([result_trace("a", (1.0, 1.0), True)])


def test_an_iterations_kept_set_is_its_self_play_seats_then_its_partner_seats():
    """kept_and_counts: the self-play games' kept seats (mean 3 of a and b: seat 0 of a), then
    the policy's seats of the partner games above their own mean (6 and 2: game p); seats and
    kept count both kinds, mean score and agreement the self-play games only."""
    games = [result_trace("a", (6.0, 3.0), True), result_trace("b", (0.0, 3.0), False)]
    partner = [
        dataclasses.replace(result_trace("p", (6.0, 0.0), True), meta={"seat": 0}),
        dataclasses.replace(result_trace("q", (9.0, 2.0), False), meta={"seat": 1}),
    ]
    args = SelfPlayArgs(partner_games=2)
    kept, entry = kept_and_counts(games, partner, args)
    assert [(t.episode_id, s) for t, s in kept] == [("a", 0), ("p", 0)]
    assert entry == {
        "games": 2,
        "seats": 4 + 2,
        "mean_score": 3.0,
        "agreement_rate": 0.5,
        "kept": 2,
        "partner_games": 2,
        "partner_kept": 1,
        "partner_score": 4.0,
        "partner_agreement_rate": 0.5,
    }
    kept, entry = kept_and_counts(games, [], SelfPlayArgs())
    assert [(t.episode_id, s) for t, s in kept] == [("a", 0)]
    assert entry == {"games": 2, "seats": 4, "mean_score": 3.0, "agreement_rate": 0.5, "kept": 1}


# counts (1, 2, 3); seat 0 values (1, 3, 1), seat 1 (4, 0, 2): the joint-best division gives
# seat 1 the book and the balls, seat 0 the hats, 6 + 10 = 16; giving seat 1 everything is 10
RICH = Context((1, 2, 3), ((1, 3, 1), (4, 0, 2)))


def test_the_best_objective_of_a_seat_is_over_every_division_of_its_context():
    def best(seat, lam):  # under the λ the game's result records
        return best_objective(result_trace("g", (0.0, 0.0), False, context=RICH, lam=lam), seat)

    assert [best(seat, 1.0) for seat in (0, 1)] == [16.0, 16.0]
    assert [best(seat, 0.0) for seat in (0, 1)] == [10.0, 10.0]
    assert [best(seat, -1.0) for seat in (0, 1)] == [10.0, 10.0]
    # λ = 0.5, seat 0: the hats (6), the book to seat 1 (0.5 · 4 = 2 beats 1), the balls either
    # way (3 kept, or 0.5 · 6 given): 11; seat 1: the book (4) and the balls (6), the hats to
    # seat 0 (0.5 · 6 = 3 beats 0): 13
    assert [best(seat, 0.5) for seat in (0, 1)] == [11.0, 13.0]


def test_min_of_best_keeps_joint_best_deals_and_drops_giving_everything_away():
    """λ = 1 on RICH: a joint-best deal (16 each), one where seat 0 gives seat 1 everything (10
    each: 0.625 of the best) and a failed game. Their mean (52 / 6) keeps both deals; at 0.8 of
    the best only the joint-best one stays, at 0.6 both."""
    games = [
        result_trace("best", (16.0, 16.0), True, context=RICH),
        result_trace("all", (10.0, 10.0), True, context=RICH),
        result_trace("failed", (0.0, 0.0), False, context=RICH),
    ]
    ids = lambda kept: [(t.episode_id, s) for t, s in kept]  # noqa: E731
    assert ids(kept_seats(games, 1.0)) == [("best", 0), ("best", 1), ("all", 0), ("all", 1)]
    assert ids(kept_seats(games, 1.0, min_of_best=0.8)) == [("best", 0), ("best", 1)]
    assert ids(kept_seats(games, 1.0, min_of_best=0.6)) == ids(kept_seats(games, 1.0))
    assert ids(kept_seats(games, 1.0, min_of_best=1.0)) == [("best", 0), ("best", 1)]
    # under λ = -1 the zero-score agreements of seed 002's rule are held to it too: none stays
    tied = result_trace("tied", (0.0, 0.0), True, context=RICH, lam=-1.0)
    won = result_trace("won", (8.0, -8.0), True, context=RICH, lam=-1.0)
    assert ids(kept_seats([won, tied], -1.0)) == [("won", 0), ("tied", 0), ("tied", 1)]
    assert ids(kept_seats([won, tied], -1.0, min_of_best=0.5)) == [("won", 0)]
    # the policy's seats of partner games score 13.5, 10 and 11 (mean 11.5): 13.5 is above it,
    # and 0.84 of its best (16); the fixed agent's 4 in game p counts for nothing
    partner = [
        dataclasses.replace(result_trace("p", (4.0, 13.5), True, context=RICH), meta={"seat": 1}),
        dataclasses.replace(result_trace("q", (10.0, 10.0), True, context=RICH), meta={"seat": 0}),
        dataclasses.replace(result_trace("r", (11.0, 11.0), True, context=RICH), meta={"seat": 0}),
    ]
    assert ids(kept_partner_seats(partner)) == [("p", 1)]
    assert ids(kept_partner_seats(partner, min_of_best=0.8)) == [("p", 1)]
    assert ids(kept_partner_seats(partner, min_of_best=0.9)) == []
    # the trainer's kept set follows --min-of-best for both kinds of seats
    kept, entry = kept_and_counts(games, partner, SelfPlayArgs(lam=1.0, min_of_best=0.8))
    assert ids(kept) == [("best", 0), ("best", 1), ("p", 1)] and entry["kept"] == 3
    kept, _ = kept_and_counts(games, partner, SelfPlayArgs(lam=1.0, min_of_best=0.9))
    assert ids(kept) == [("best", 0), ("best", 1)]


class ScriptedSeats:
    """A model-like agent (it writes text) whose answers come from a fixed script per seat:
    seat 0 first sends a malformed answer, which the game refuses with a correction."""

    name = "script"

    def __init__(self, game):
        self.game = game
        self.said = {0: 0, 1: 0}

    def text(self, seat: int, view) -> str:
        counts = view.counts
        books = (counts[0], 0, 0)
        script = {
            0: ["hello", "[message] I would like the books.", f"[propose] {render_share(books)}"],
            1: [
                "[message] Take the books, I keep the rest.",
                f"[propose] {render_share(complement(counts, books))}",
            ],
        }
        return script[seat][self.said[seat]]

    def act(self, batch):
        out = []
        for obs in batch:
            text = self.text(obs.seat, obs.view)
            self.said[obs.seat] += 1
            out.append(Decision(self.game.parse(text), text=text, tokens=len(text.split())))
        return out


def scripted_trace(seed: int = 3) -> Trace:
    game = get_game("dond")
    agent = ScriptedSeats(game)
    episode = Episode(game, "0", seed, ("script", "script"))
    while not episode.done:
        for obs in episode.waiting():
            episode.submit(obs.seat, agent.act([obs])[0])
        episode.step()
    return episode.trace()


def test_a_seat_chat_marks_the_refused_answer_and_keeps_the_correction():
    trace = scripted_trace()
    assert trace.rounds[-1].info["agreement"]
    messages, trained = seat_chat(trace, 0)
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3
    assert [m["content"] for m in messages[2::2]] == [
        "hello",
        "[message] I would like the books.",
        f"[propose] {render_share((trace.scenario['counts'][0], 0, 0))}",
    ]
    assert messages[3]["content"].startswith("Your last answer was not accepted")
    assert trained == [False, True, True]
    other, other_trained = seat_chat(trace, 1)
    assert other_trained == [True, True]
    heard = [m["content"] for m in other if m["role"] == "user"]
    assert any("I would like the books." in x for x in heard)  # seat 0's message, as user text
    assert not any("hello" in x for x in heard)  # a refused answer never reaches the other seat


def test_loss_is_on_the_seats_accepted_answers_only():
    from transformers import AutoTokenizer

    from stratagem.backends.embedded import embedded_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    trace = scripted_trace()
    messages, trained = seat_chat(trace, 0)
    row = seat_tokens(tokenizer, messages, trained, max_length=4096)
    ids, labels = row["input_ids"], row["labels"]
    assert len(ids) == len(labels)
    learned = [i for i, label in zip(ids, labels, strict=True) if label != IGNORE]
    answers = [m["content"] for m, ok in zip(messages[2::2], trained, strict=True) if ok]
    assert tokenizer.decode(learned) == "".join(a + END for a in answers)
    assert "hello" in tokenizer.decode(ids)  # the refused answer stays in the context
    assert len(label_runs(labels)) == 2
    everything = seat_tokens(tokenizer, messages, [True] * 3, max_length=4096)
    assert everything["input_ids"] == ids  # masking changes labels, never the tokens
    assert len(label_runs(everything["labels"])) == 3
    cut = seat_tokens(tokenizer, messages, trained, max_length=50)
    assert len(cut["input_ids"]) == len(cut["labels"]) == 50
    assert cut == {"input_ids": ids[-50:], "labels": labels[-50:]}  # the end is kept


def test_a_long_self_play_chat_keeps_its_final_proposal():
    from transformers import AutoTokenizer

    from stratagem.backends.embedded import embedded_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    system = {"role": "system", "content": "You split 3 books, 2 hats and 1 ball."}
    messages = [system]
    for k in range(20):
        messages += [
            {"role": "user", "content": f'The other negotiator said: "offer {k}, take it?"'},
            {"role": "assistant", "content": f"[message] Counter-offer number {k}: no."},
        ]
    final = "[propose] (3 books, 0 hats, 1 ball)"
    messages += [
        {"role": "user", "content": "The other negotiator proposed a division."},
        {"role": "assistant", "content": final},
    ]
    trained = [True] * 21
    whole = seat_tokens(tokenizer, messages, trained, max_length=100_000)
    assert len(whole["input_ids"]) > 300
    row = seat_tokens(tokenizer, messages, trained, max_length=300)
    assert len(row["input_ids"]) == len(row["labels"]) <= 300
    text = tokenizer.decode(row["input_ids"])
    assert text.startswith(tokenizer.apply_chat_template([system], tokenize=False))  # the rules
    assert text.endswith(final + END)  # the move the reward is for
    runs = label_runs(row["labels"])
    assert tokenizer.decode(row["input_ids"][slice(*runs[-1])]) == final + END
    # whole exchanges were dropped from the start: every kept answer is whole and trained
    kept = [tokenizer.decode(row["input_ids"][slice(*r)]) for r in runs]
    assert kept == [m["content"] + END for m in messages[2::2][-len(runs) :]]
    assert "Counter-offer number 0:" not in text
    # the final answer alone longer than the budget: its last tokens are still the ones kept
    tail = seat_tokens(tokenizer, messages, trained, max_length=5)
    assert tail == {"input_ids": whole["input_ids"][-5:], "labels": whole["labels"][-5:]}


def test_self_play_is_one_batched_call_per_tick_and_a_rerun_reads_the_games_back(tmp_path):
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.scripted import ScriptedBackend

    game = get_game("dond")
    backend = ScriptedBackend(lambda chat: "hello")  # refused every time: 5 in a row abort
    agent = LLMAgent(backend, game)
    args = SelfPlayArgs(games=3, eval_games=4)
    specs = selfplay.game_specs("train", agent, agent, args, iteration=1)
    path = tmp_path / "iteration-1.jsonl"
    traces = play_games(game, specs, path, "key", max_live=3)
    assert backend.calls == [3] * 5  # both seats are one agent: each tick, one call for all
    assert [t.episode_id for t in traces] == ["key/1/train/0", "key/1/train/1", "key/1/train/2"]
    assert all(t.rounds[-1].info["aborted"] for t in traces)
    assert play_games(game, specs, path, "key", max_live=3) == traces
    assert backend.calls == [3] * 5  # nothing played again

    opponent = get_strategy("dond", "FairSplit")
    fixed = selfplay.game_specs("fixed", agent, opponent, args, iteration=2)
    assert [s.agents.index(agent) for s in fixed] == [s.meta["seat"] for s in fixed] == [0, 1, 0, 1]
    later = selfplay.game_specs("fixed", agent, opponent, args, iteration=3)
    assert [s.seed for s in fixed] == [s.seed for s in later]  # the same contexts each iteration
    train_seeds = {s.seed for s in specs} | {
        s.seed for s in selfplay.game_specs("train", agent, agent, args, iteration=2)
    }
    assert len(train_seeds) == 6  # fresh games every iteration


def _refused_phases():
    """DoND, a scripted model refused every time (5 in a row abort a game), and iteration 1's
    specs of 3 self-play and 4 FairSplit partner games."""
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.scripted import ScriptedBackend

    game = get_game("dond")
    backend = ScriptedBackend(lambda chat: "hello")
    agent = LLMAgent(backend, game)
    args = SelfPlayArgs(games=3, partner_games=4)
    fair = get_strategy("dond", "FairSplit")
    train = selfplay.game_specs("train", agent, agent, args, iteration=1)
    partner = selfplay.game_specs("partner", agent, fair, args, iteration=1)
    return game, backend, train, partner


def test_an_iterations_phases_are_played_in_one_call_and_come_back_apart(tmp_path):
    """Self-play and partner games share the batch (``play_groups``): the first tick asks the
    model for every game's opening at once, not first the self-play games' and, once those
    have ended, the partner games'; each phase's traces come back in spec order, the games (ids,
    contexts, seats, moves) the phases played one by one give. The scripted model answers alike
    whatever shares its batch; that the real model's sampled games do too is what
    ``benchmarks/selfplay.py --partner-games`` checks ("same games")."""
    game, backend, train, partner = _refused_phases()
    one = [tmp_path / "one.jsonl"] * 2
    together = play_groups(game, [train, partner], one, "key", max_live=8)
    assert backend.calls[0] > 3 and backend.calls[0] == 3 + sum(
        s.meta["seat"] == t.rounds[-1].info["first"]
        for s, t in zip(partner, together[1], strict=True)
    )
    assert [[t.episode_id for t in g] for g in together] == [
        ["key/1/train/0", "key/1/train/1", "key/1/train/2"],
        [f"key/1/partner/{k}" for k in range(4)],
    ]
    apart = [
        play_games(game, g, tmp_path / f"{i}.jsonl", "key", 8)
        for i, g in enumerate((train, partner))
    ]
    assert untimed(together) == untimed(apart)
    calls = len(backend.calls)
    assert play_groups(game, [train, partner], one, "key", 8) == together
    assert len(backend.calls) == calls  # nothing played again
    # a file with only the first phase's games in it (as a run written one phase after the
    # other, killed between them, left it): only the second phase is played
    shutil.copy(tmp_path / "0.jsonl", tmp_path / "half.jsonl")
    again = play_groups(game, [train, partner], [tmp_path / "half.jsonl"] * 2, "key", 8)
    assert backend.calls[calls] == backend.calls[0] - 3  # the partner games' openings alone
    assert untimed(again) == untimed(together)


def test_phases_written_to_files_of_their_own_still_share_one_call(tmp_path, monkeypatch):
    """Each list of games into its own trace file (as ``selfplay-eval`` writes its phases), in
    one ``play`` call: a game is skipped when its own file holds it and read back from there
    only; ids listed twice and a wrong number of files are refused; one file however spelt has
    one writer."""
    game, backend, train, partner = _refused_phases()
    together = play_groups(game, [train, partner], [tmp_path / "one.jsonl"] * 2, "key", 8)
    assert backend.calls[0] > 3  # both phases' openings in the first tick

    # the first phase's file already written, only the second phase is played, into its file
    play_games(game, train, tmp_path / "0.jsonl", "key", 8)
    calls = len(backend.calls)
    own = [tmp_path / "0.jsonl", tmp_path / "own" / "partner.jsonl"]
    split = play_groups(game, [train, partner], own, "key", 8)
    assert backend.calls[calls] == backend.calls[0] - 3
    assert untimed(split) == untimed(together)
    in_file = lambda path: sorted(t.episode_id for t in read_traces(path))  # noqa: E731
    assert in_file(own[1]) == sorted(t.episode_id for t in together[1])
    assert in_file(own[0]) == sorted(t.episode_id for t in together[0])
    # both files written: a rerun plays nothing; a game in the other list's file is no excuse
    calls = len(backend.calls)
    assert play_groups(game, [train, partner], own, "key", 8) == split
    assert len(backend.calls) == calls
    crossed = play_groups(game, [train, partner], own[::-1], "key", 8)
    assert len(backend.calls) > calls  # each list's games are looked for in its own file only
    assert untimed(crossed) == untimed(together)
    # a different copy of a game in another list's file is neither skipped on nor read back
    stale = dataclasses.replace(together[0][0], meta={**together[0][0].meta, "stale": True})
    mine, other = tmp_path / "mine.jsonl", tmp_path / "other.jsonl"
    with TraceWriter(other) as writer:
        writer.write(stale)
    fresh = play_groups(game, [train, partner], [mine, other], "key", 8)
    assert untimed(fresh) == untimed(together) and "stale" not in fresh[0][0].meta
    assert in_file(mine) == sorted(t.episode_id for t in together[0])
    with pytest.raises(ValueError, match="2 lists of games but 1 trace files"):
        play_groups(game, [train, partner], own[:1], "key", 8)
    with pytest.raises(ValueError, match="listed twice"):
        play_groups(game, [train, train], [tmp_path / "a.jsonl", tmp_path / "b.jsonl"], "key", 8)
    # one file under two spellings is one file: one writer, each game written once
    opened = []

    class CountingWriter(TraceWriter):
        def __init__(self, path, *args, **kwargs):
            opened.append(path)
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(selfplay_data, "TraceWriter", CountingWriter)
    spelt = [tmp_path / "c.jsonl", tmp_path / "own" / ".." / "c.jsonl"]
    assert untimed(play_groups(game, [train, partner], spelt, "key", 8)) == untimed(together)
    assert opened == [spelt[0].resolve()]
    assert in_file(spelt[0]) == sorted(t.episode_id for g in together for t in g)


def test_label_runs():
    assert label_runs([IGNORE, 5, 6, IGNORE, IGNORE, 7]) == [(1, 3), (5, 6)]
    assert label_runs([IGNORE, IGNORE]) == []


def test_stalled():
    assert not stalled([1.0, 2.0, 2.0], patience=2)  # three values: only one before the window
    assert stalled([1.0, 3.0, 2.0, 3.0], patience=2)  # 3.0 does not beat 3.0
    assert not stalled([1.0, 3.0, 2.0, 3.5], patience=2)
    assert not stalled([5.0, 1.0, 1.0, 1.0], patience=0)
    assert stalled([5.0, 1.0], patience=1)


def test_bad_settings_are_refused_in_one_line(tmp_path):
    with pytest.raises(UnknownNameError, match="did you mean 'FairSplit'"):
        SelfPlayArgs(opponent="FairSplt").check()
    with pytest.raises(ConfigError, match="--stop-on fixed"):
        SelfPlayArgs(lam=-1.0, stop_on="selfplay").check()
    with pytest.raises(ConfigError, match="--games must be at least 1"):
        SelfPlayArgs(games=0).check()
    with pytest.raises(ConfigError, match="--lam must be in"):
        SelfPlayArgs(lam=2.0).check()
    with pytest.raises(ConfigError, match=r"--min-of-best must be in \[0, 1\], got 1.5"):
        SelfPlayArgs(min_of_best=1.5).check()
    assert SelfPlayArgs(lam=-1.0).selection == "fixed_score"
    assert SelfPlayArgs().selection == "selfplay_score"
    fingerprint = SelfPlayArgs(out=tmp_path).fingerprint()
    assert "iterations" not in fingerprint and "patience" not in fingerprint
    assert fingerprint["games"] == 500 and fingerprint["out"] == str(tmp_path)


def test_the_command_is_registered_with_the_dataclass_options():
    import typer

    from stratagem.cli import train as cli

    command = typer.main.get_command(cli._trainers(None)).commands["selfplay"]
    flags = {d for p in command.params for d in p.opts}
    assert {"--games", "--iterations", "--patience", "--opponent", "--lam", "--adapter"} <= flags
    docs = field_docs(SelfPlayArgs)
    assert set(docs) == {f.name for f in dataclasses.fields(SelfPlayArgs)}


# ---- one run on the tiny LM ----

STEERED_STRATEGIES = ("FairSplit", "Cooperative", "ValueGreedy")


class Steered:
    """The policy generates every answer (real batched sampling on the tiny LM), and its text
    picks the answer played: a malformed one (refused, corrected) or a rule-based negotiator's.
    Games then depend on the weights and the sampling, yet reach agreements a random LM never
    would."""

    def __init__(self, llm):
        self.llm = llm
        self.name = llm.name
        self.game = llm.game

    def act(self, batch):
        out = []
        for obs, generated in zip(batch, self.llm.act(batch), strict=True):
            pick = derive(0, generated.text) % 4
            if pick == 3 and obs.attempt == 0:
                text = "hello"
            else:
                rule = get_strategy("dond", STEERED_STRATEGIES[pick % 3]).act([obs])[0]
                text = self.game.answer_text(rule.action)
            action = self.game.parse(text)
            out.append(dataclasses.replace(generated, action=action, text=text))
        return out


@pytest.fixture
def steered(monkeypatch):
    real = selfplay.selfplay_agent
    monkeypatch.setattr(selfplay, "selfplay_agent", lambda *a: Steered(real(*a)))


def tiny_settings(tiny_model, out, **overrides) -> SelfPlayArgs:
    settings = dict(
        model=tiny_model,
        out=out,
        iterations=2,
        games=6,
        eval_games=2,
        max_turns=4,
        max_new_tokens=4,
        patience=0,
        lora_rank=4,
        lora_alpha=8,
        learning_rate=5e-3,
        epochs=1.0,
        batch_size=2,
        max_live=8,
    )
    return SelfPlayArgs(**{**settings, **overrides})


def adapter(folder):
    from safetensors.torch import load_file

    return load_file(folder / "adapter" / "adapter_model.safetensors")


def rows_without_timings(state_file) -> tuple[list, list]:
    state = json.loads(state_file.read_text())
    strip = ("play_seconds", "sft_seconds", "eval_seconds")
    log = [{k: v for k, v in e.items() if k not in strip} for e in state["log"]]
    evals = [{k: v for k, v in e.items() if k not in strip} for e in state["evals"]]
    return log, evals


@pytest.mark.slow
def test_one_iteration_end_to_end_and_resume_equals_uninterrupted(
    tiny_model, tmp_path, steered, monkeypatch
):
    quiet = lambda _: None  # noqa: E731
    full = tmp_path / "full"
    live_backends = []  # at each release of memory: the games' backends still reachable

    def release() -> bool:
        gc.collect()
        live = [o for o in gc.get_objects() if isinstance(o, HFBackend)]
        live_backends.append(sum(b.model_id.startswith("selfplay:") for b in live))
        return True

    monkeypatch.setattr(selfplay, "release_memory", release)
    train_selfplay(tiny_settings(tiny_model, full), log=quiet)
    # after each evaluation (3), each iteration's games (2) and its fine-tuning (2), with no
    # backend (and its prompt caches) left alive to hold memory through the next phase
    assert live_backends == [0] * 7

    # the kept set of iteration 1 is what the filter picks from the iteration's training games
    state = json.loads((full / "checkpoint-2/trainer_state.json").read_text())
    first = state["log"][0]
    written = read_traces(full / "traces/iteration-1.jsonl")  # in the order the games ended
    games = [t for t in written if t.meta["phase"] == "train"]
    games.sort(key=lambda t: t.meta["index"])
    assert len(games) == 6
    kept = kept_seats(games, lam=0.0)
    assert 0 < first["kept"] == len(kept) < first["seats"] == 12
    listed = json.loads((full / "traces/kept-1.json").read_text())
    assert listed == [[t.episode_id, seat] for t, seat in kept]
    assert first["rows"] == len(kept) and first["sft_steps"] == -(-len(kept) // 2)  # batch 2
    assert first["trained_tokens"] > 0 and first["sft_loss"] > 0
    assert [e["step"] for e in state["evals"]] == [0, 1, 2]
    assert (full / "curves.png").stat().st_size > 0
    assert (full / "iterations.md").read_text().count("\n") == 2 + 3
    assert json.loads((full / "best.json").read_text())["metric"] == "selfplay_score"
    trained = adapter(full / "checkpoint-1")
    assert any(v.abs().sum() > 0 for k, v in trained.items() if "lora_B" in k), "SFT moved"

    # killed in iteration 2's SFT (its games finished and were written), then run again
    resumed = tmp_path / "resumed"
    train_selfplay(tiny_settings(tiny_model, resumed, iterations=1), log=quiet)
    real_fine_tune = selfplay.fine_tune

    def killed(policy, tokenizer, rows, args, iteration):
        if iteration == 2:
            raise KeyboardInterrupt
        return real_fine_tune(policy, tokenizer, rows, args, iteration)

    monkeypatch.setattr(selfplay, "fine_tune", killed)
    with pytest.raises(KeyboardInterrupt):
        train_selfplay(tiny_settings(tiny_model, resumed), log=quiet)
    assert not (resumed / "checkpoint-2").exists()
    monkeypatch.setattr(selfplay, "fine_tune", real_fine_tune)
    lines = []
    train_selfplay(tiny_settings(tiny_model, resumed), log=lines.append)
    assert lines[0] == f"resuming {resumed} after iteration 1"

    a, b = adapter(full / "checkpoint-2"), adapter(resumed / "checkpoint-2")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert not all(torch.equal(a[k], trained[k]) for k in a), "iteration 2 trained too"
    assert rows_without_timings(full / "checkpoint-2/trainer_state.json") == rows_without_timings(
        resumed / "checkpoint-2/trainer_state.json"
    )
    full_games = read_traces(full / "traces/iteration-2.jsonl")
    resumed_games = read_traces(resumed / "traces/iteration-2.jsonl")
    assert [t.decisions[-1].text for t in full_games] == [
        t.decisions[-1].text for t in resumed_games
    ]


@pytest.mark.slow
def test_plays_per_context_keep_seats_by_their_own_contexts_mean(
    tiny_model, tmp_path, steered, monkeypatch
):
    calls = []
    real = selfplay_data.kept_seats
    monkeypatch.setattr(
        selfplay_data, "kept_seats", lambda *a, **kw: calls.append(kw) or real(*a, **kw)
    )
    out = tmp_path / "run"
    train_selfplay(tiny_settings(tiny_model, out, iterations=1, plays_per_context=3), log=print)
    assert calls == [{"per_context": True, "min_of_best": 0.0}]
    games = [t for t in read_traces(out / "traces/iteration-1.jsonl") if t.meta["phase"] == "train"]
    games.sort(key=lambda t: t.meta["index"])
    assert [t.scenario for t in games[:3]] == [games[0].scenario] * 3
    assert [t.scenario for t in games[3:]] == [games[3].scenario] * 3
    kept = kept_seats(games, lam=0.0, per_context=True)
    listed = json.loads((out / "traces/kept-1.json").read_text())
    assert listed == [[t.episode_id, seat] for t, seat in kept] and kept


@pytest.mark.slow
def test_early_stopping_ends_the_run_and_a_rerun_does_not_continue(tiny_model, tmp_path):
    # a random LM never reaches an agreement: every iteration scores 0, none beats iteration 0
    out = tmp_path / "run"
    args = tiny_settings(tiny_model, out, iterations=5, games=2, eval_games=1, patience=1)
    lines = []
    train_selfplay(args, log=lines.append)
    assert any(line.startswith("stopping early") for line in lines)
    assert any(line.startswith("iteration 1: no game above the mean") for line in lines)
    manifest = json.loads((out / "run.json").read_text())
    assert (manifest["status"], manifest["iterations"]) == ("stopped_early", 1)
    lines.clear()
    train_selfplay(args, log=lines.append)
    assert lines[:2] == [f"resuming {out} after iteration 1", lines[1]]
    assert lines[1].startswith("stopping early") and not (out / "checkpoint-2").exists()
    with pytest.raises(ConfigError):
        train_selfplay(dataclasses.replace(args, games=3), log=lines.append)


def test_iterations_table_shows_joint_best_and_the_openers_share_and_dashes_for_older_rows():
    from stratagem.training.checkpoints import TrainerState
    from stratagem.training.selfplay.report import iterations_markdown

    cell = lambda v: {"value": v, "stderr": 0.05, "n": 24}  # noqa: E731
    keys = ("score", "agreement_rate", "pareto_rate", "dialogue_tokens")
    row = {f"{p}_{k}": cell(1.0) for p in ("selfplay", "fixed") for k in keys}
    row["selfplay_vocabulary_size"] = cell(20.0)
    older = {"step": 0, **row}  # made before the metric existed
    newer = {
        "step": 1,
        **row,
        "selfplay_first_speaker_share": cell(0.82),
        "selfplay_joint_best_rate": cell(0.625),
    }
    log = [{"iteration": 1, "kept": 58, "seats": 128, "sft_loss": 0.031}]
    table = iterations_markdown(TrainerState(log=log, evals=[older, newer]), "FairSplit")
    head, _, first, second = table.splitlines()
    assert "| joint-best | opener's share |" in head
    assert head.count("|") == first.count("|") == second.count("|") == 14
    assert first.split("|")[5].strip() == first.split("|")[6].strip() == "—"
    assert second.split("|")[5].strip() == "0.62 ± 0.05"
    assert second.split("|")[6].strip() == "0.82 ± 0.05" and "58 / 128" in second


def test_a_score_over_no_game_is_never_the_best():
    from stratagem.training.checkpoints import TrainerState

    state = TrainerState()
    cell = lambda v, n: {"select_score": {"value": v, "stderr": 0.0, "n": n}}  # noqa: E731
    assert state.record_eval({"step": 0, **cell(-2.0, 8)}, "select_score")
    assert not state.record_eval({"step": 1, **cell(0.0, 0)}, "select_score")  # all errored
    assert state.best.step == 0 and len(state.evals) == 2


def test_the_selection_games_score_is_in_the_row_and_the_table():
    from stratagem.training.checkpoints import TrainerState
    from stratagem.training.selfplay.report import evaluation_row, headline, iterations_markdown

    def game(k, payoffs, status="complete"):
        info = {"agreement": True, "item_scores": list(payoffs)}
        trace = result_trace(f"0/select/{k}", payoffs, True, status)
        return dataclasses.replace(trace, rounds=(RoundResult(0, (), payoffs, info),))

    games = [game(0, (4.0, 6.0)), game(1, (2.0, 0.0)), game(2, (9.0, 9.0), "error")]
    both = evaluation_row(0, [], [], games)
    assert both["select_score"] == {"value": 3.0, "stderr": 2.0, "n": 2}  # (5, 1) over seats
    assert both["select_errors"] == 1 and headline(both)["select_score"] == 3.0
    seated = [dataclasses.replace(t, meta={"seat": k % 2}) for k, t in enumerate(games)]
    policy = evaluation_row(0, [], [], seated, select_both_seats=False)
    assert policy["select_score"]["value"] == 2.0  # seat 0 of the first, seat 1 of the second
    assert "select_score" not in evaluation_row(0, [], [])
    table = iterations_markdown(TrainerState(evals=[both]), "FairSplit").splitlines()
    assert table[0].endswith("| selection games: score |")
    assert table[2].endswith("| 3.00 ± 2.00 |")
    assert table[0].count("|") == table[1].count("|") == table[2].count("|") == 15


@pytest.mark.slow
def test_a_run_with_selection_games_chooses_the_best_on_them(tiny_model, tmp_path, steered):
    out = tmp_path / "run"
    train_selfplay(tiny_settings(tiny_model, out, iterations=1, select_games=2), log=print)
    state = json.loads((out / "checkpoint-1/trainer_state.json").read_text())
    selected = [e["select_score"]["value"] for e in state["evals"]]
    best = json.loads((out / "best.json").read_text())
    assert best["metric"] == "select_score"
    assert best["step"] == max(range(len(selected)), key=lambda k: (selected[k], -k))
    for iteration in (0, 1):
        written = read_traces(out / f"traces/iteration-{iteration}.jsonl")
        select = [t for t in written if t.meta["phase"] == "select"]
        assert sorted(t.meta["index"] for t in select) == [0, 1]
        evaluated = {str(t.scenario) for t in written if t.meta["phase"] != "select"}
        assert len(select) == 2 and not {str(t.scenario) for t in select} & evaluated
    assert "selection games: score" in (out / "iterations.md").read_text()


@pytest.mark.slow
def test_partner_games_join_the_kept_set_with_the_policys_seat(tiny_model, tmp_path, steered):
    out = tmp_path / "run"
    settings = tiny_settings(tiny_model, out, iterations=1, partner_games=4, partner="Cooperative")
    train_selfplay(settings, log=print)
    written = read_traces(out / "traces/iteration-1.jsonl")
    by_phase = {
        phase: sorted(
            (t for t in written if t.meta["phase"] == phase), key=lambda t: t.meta["index"]
        )
        for phase in ("train", "partner", "fixed")
    }
    train, partner = by_phase["train"], by_phase["partner"]
    assert len(train) == 6 and [t.meta["seat"] for t in partner] == [0, 1, 0, 1]
    # trained with --partner, evaluated against --opponent
    assert [t.agents[1 - t.meta["seat"]] for t in partner] == ["Cooperative"] * 4
    assert {t.agents[1 - t.meta["seat"]] for t in by_phase["fixed"]} == {"FairSplit"}
    expected = kept_seats(train, lam=0.0) + kept_partner_seats(partner)
    listed = json.loads((out / "traces/kept-1.json").read_text())
    assert listed == [[t.episode_id, seat] for t, seat in expected]
    assert any("/partner/" in episode for episode, _ in listed), "a partner game was kept"
    state = json.loads((out / "checkpoint-1/trainer_state.json").read_text())
    log = state["log"][0]
    assert log["partner_games"] == 4 and log["partner_kept"] == len(kept_partner_seats(partner))
    assert log["seats"] == 12 + 4 and log["kept"] == len(expected) == log["rows"]
    own = [t.rounds[-1].payoffs[t.meta["seat"]] for t in partner]
    assert log["partner_score"] == pytest.approx(sum(own) / 4)

    # killed after the iteration's games: a rerun reads both kinds back and trains the same
    trained = adapter(out / "checkpoint-1")
    shutil.rmtree(out / "checkpoint-1")
    train_selfplay(settings, log=print)
    again = adapter(out / "checkpoint-1")
    assert all(torch.equal(trained[k], again[k]) for k in trained)
    assert json.loads((out / "traces/kept-1.json").read_text()) == listed
    assert len(read_traces(out / "traces/iteration-1.jsonl")) == len(written)  # none played again


def test_gradient_checkpointing_gives_the_same_sft_and_is_off_again_for_the_games(
    tiny_model, tmp_path, monkeypatch
):
    import transformers.modeling_utils

    from stratagem.training.policy import load_policy

    recomputed = []
    real_checkpoint = transformers.modeling_utils.checkpoint

    def checkpoint(*args, **kwargs):
        recomputed.append(1)
        return real_checkpoint(*args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "checkpoint", checkpoint)

    def trained(checkpointing: bool):
        args = tiny_settings(tiny_model, tmp_path / str(checkpointing), lora_dropout=0.1)
        args = dataclasses.replace(args, gradient_checkpointing=checkpointing)
        policy, tokenizer = load_policy(args)
        ids = tokenizer("I propose: book=1 hat=2 ball=0. Deal?")["input_ids"]
        rows = [{"input_ids": ids, "labels": [-100] * 4 + ids[4:]} for _ in range(4)]
        selfplay.fine_tune(policy, tokenizer, rows, args, 1)
        layers = [m for m in policy.modules() if hasattr(m, "gradient_checkpointing")]
        assert layers and not any(m.gradient_checkpointing for m in layers)
        assert not policy.get_input_embeddings()._forward_hooks  # the input-grad hook is gone
        assert not policy.training  # the backend asks for the KV cache itself (use_cache=True)
        return {k: v for k, v in policy.state_dict().items() if "lora_" in k}

    plain = trained(False)
    assert not recomputed
    checkpointed = trained(True)
    assert recomputed  # the decoder layers ran through torch's checkpoint
    assert any(v.abs().sum() > 0 for k, v in plain.items() if "lora_B" in k)
    for key in plain:  # dropout draws are replayed in the recomputation
        assert torch.allclose(plain[key], checkpointed[key], atol=1e-6), key


def test_gradient_checkpointing_is_not_part_of_a_runs_fingerprint(tiny_model, tmp_path):
    args = tiny_settings(tiny_model, tmp_path)
    on = dataclasses.replace(args, gradient_checkpointing=True)
    assert args.fingerprint() == on.fingerprint()


def untimed(groups: list[list[Trace]]) -> list[list[Trace]]:
    """The traces with every decision's time set to 0 (how long a decision took is no part of
    the game)."""
    return [
        [
            dataclasses.replace(
                t, decisions=tuple(dataclasses.replace(d, seconds=0.0) for d in t.decisions)
            )
            for t in g
        ]
        for g in groups
    ]
