"""Leduc poker as a text game: hands, seats, prompts and the probe's chats (the tree itself is
checked against OpenSpiel in tests/solvers)."""

from __future__ import annotations

import random

import pytest

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.errors import GameError
from stratagem.game import chat_for
from stratagem.games import get_game
from stratagem.games.leduc import (
    DECK,
    HANDS,
    Act,
    Leduc,
    deal_for,
    game_tree,
    key_of,
    parse_key,
)
from stratagem.play import EpisodeSpec, play, play_one
from stratagem.seeding import derive
from stratagem.strategies import get_strategy
from stratagem.tree import infosets

KEYS = list(infosets(game_tree()))
LETTER = {"FOLD": "F", "CALL": "C", "RAISE": "R"}


def random_play(seeds):
    game = get_game("leduc")
    agents = (get_strategy("leduc", "RandomLegal"), get_strategy("leduc", "RandomLegal"))
    return list(play(game, [EpisodeSpec(f"e{s}", s, agents) for s in seeds]))


def test_an_episode_is_four_hands_with_seats_alternating_first():
    for trace in random_play(range(20)):
        assert len(trace.rounds) == HANDS == 4
        assert [r.info["first"] for r in trace.rounds] == [0, 1, 0, 1]
        assert [r.moves[0][0] for r in trace.rounds] == [0, 1, 0, 1]
        for r in trace.rounds:
            assert r.payoffs[0] == -r.payoffs[1]
            assert abs(r.payoffs[0]) <= 13


def test_every_hand_pays_what_the_tree_pays():
    """Each played hand, walked through the solver tree (positions, deal, betting), ends at a
    terminal whose returns are the hand's payoffs by position."""
    for trace in random_play(range(60)):
        for r in trace.rounds:
            first = r.info["first"]
            cards = r.info["cards"]
            node = game_tree().child(cards[first]).child(cards[1 - first])
            for r_index, sequence in enumerate(r.info["betting"]):
                if r_index == 1:
                    node = node.child(r.info["public"])
                for letter in sequence:
                    node = node.child({"F": "FOLD", "C": "CALL", "R": "RAISE"}[letter])
            by_position = (r.payoffs[first], r.payoffs[1 - first])
            assert node.returns() == by_position


def test_the_probe_covers_every_information_set_keyed_as_the_tree():
    probes = Leduc().infoset_observations()
    assert list(probes) == KEYS and len(KEYS) == 936
    players = infosets(game_tree())
    for key, obs in probes.items():
        assert obs.round == 0 and obs.seat == players[key][0]  # the first hand: seat = position
        assert obs.legal == players[key][1]
        assert key_of(obs.view) == key


def _seed_dealing(deal):
    """The first seed whose first hand deals ``deal`` (seat 0, seat 1, public)."""
    for seed in range(20000):
        if Leduc().new_episode(seed).deals[0] == deal:
            return seed
    raise AssertionError(deal)


def test_every_probe_is_the_chat_the_seat_sees_in_play():
    """For each of the 936 information sets, an episode that reaches it through the episode
    engine (the deal from a seed, bare-token answers) shows the seat exactly the probe's chat."""
    game = Leduc()
    probes = game.infoset_observations()
    seeds: dict[tuple, int] = {}
    for key in KEYS:
        card, public, betting = parse_key(key)
        deal = deal_for(key)
        seed = seeds.setdefault(deal, _seed_dealing(deal))
        episode = Episode(game, "probe", seed, ("a", "b"))
        path = list("".join(betting))
        while True:
            (obs,) = episode.waiting()
            if not path:
                break
            action = {"F": Act.FOLD, "C": Act.CALL, "R": Act.RAISE}[path.pop(0)]
            episode.submit(obs.seat, Decision(action))
            episode.step()
        assert obs.seat == probes[key].seat and obs.view.card == card
        assert chat_for(obs) == chat_for(probes[key]), key


def test_random_play_sees_the_probes_chats():
    """Decisions of the first hand met in random play are asked exactly what the probe asks."""
    probes = Leduc().infoset_observations()
    seen = 0

    class Recorder(type(get_strategy("leduc", "RandomLegal"))):  # type: ignore[misc]
        def act(self, batch):
            nonlocal seen
            for obs in batch:
                if obs.view.hand == 0:
                    assert chat_for(obs) == chat_for(probes[key_of(obs.view)])
                    seen += 1
            return super().act(batch)

    for seed in range(150):
        play_one(get_game("leduc"), [Recorder(), Recorder()], seed)
    assert seen > 300


def test_single_prompt_style_probes_hold_the_whole_story():
    single = get_game("leduc", prompt_style="single").infoset_observations()
    assert len(single) == 936
    for obs in single.values():
        assert not obs.history and obs.prompt.startswith("This is the first hand")


def test_the_chat_of_one_information_set_word_for_word():
    obs = Leduc().infoset_observations()["Qs Kh:CRC/CR"]
    turns = [(m.role, m.content) for m in obs.history] + [("user", obs.prompt)]
    assert turns == [
        (
            "user",
            "Hand 1 of 4. You act first in both rounds. Your card: Qs. Round 1: raises are 2 "
            "chips.\nChips in the pot: you 1, opponent 1.\nYour options: CALL (check: nothing "
            "to call), RAISE (put in 2).",
        ),
        ("assistant", "CALL"),
        (
            "user",
            "Opponent: RAISE.\nChips in the pot: you 1, opponent 3.\nYour options: FOLD (give "
            "up the pot), CALL (put in 2 to match), RAISE (put in 4).",
        ),
        ("assistant", "CALL"),
        (
            "user",
            "Round 1 is over. Public card: Kh. Round 2: raises are 4 chips.\nChips in the pot: "
            "you 3, opponent 3.\nYour options: CALL (check: nothing to call), RAISE (put in 4).",
        ),
        ("assistant", "CALL"),
        (
            "user",
            "Opponent: RAISE.\nChips in the pot: you 3, opponent 7.\nYour options: FOLD (give "
            "up the pot), CALL (put in 4 to match), RAISE (put in 8).",
        ),
    ]
    assert "it is a check, and you still answer CALL" in obs.rules


def test_a_new_hand_opens_with_how_the_last_one_ended():
    state = Leduc().new_episode(4)
    public = state.deals[0][2]
    for seat, action in ((0, "RAISE"), (1, "CALL"), (0, "CALL"), (1, "RAISE"), (0, "FOLD")):
        state.apply({seat: Act(action)})
    assert state.to_act() == (1,)  # hand 2: seat 1 acts first
    prompt = state.observe(1).prompt
    assert prompt.splitlines()[0] == (
        f"Hand 1 ended: public card {public}; round 1: opponent RAISE, you CALL; round 2: "
        "opponent CALL (check), you RAISE, opponent FOLD; the opponent folded; you won 3 chips. "
        "Your total: +3 chips."
    )
    assert "showed" not in prompt  # no showdown: the folded card stays hidden
    assert "Hand 2 of 4. You act first in both rounds." in prompt


def test_the_public_card_and_the_opponents_card_stay_hidden_until_shown():
    for seed in range(40):
        state = Leduc().new_episode(seed)
        s0, s1, public = state.deals[0]
        assert public not in state.observe(0).prompt and s1 not in state.observe(0).prompt
        state.apply({0: Act.CALL})
        assert public not in state.observe(1).prompt and s0 not in state.observe(1).prompt
        state.apply({1: Act.CALL})
        assert f"Public card: {public}." in state.observe(0).prompt


def test_check_reads_as_call_only_when_there_is_nothing_to_call():
    game = Leduc()
    assert game.parse("I will check", ("CALL", "RAISE")) is Act.CALL
    assert game.parse("Check.", ("CALL", "RAISE")) is Act.CALL
    assert game.parse("CALL (check)", ("CALL", "RAISE")) is Act.CALL
    assert game.parse("check", ("FOLD", "CALL", "RAISE")) is None  # a check is no answer to a raise
    assert game.parse("check or raise", ("CALL", "RAISE")) is None  # ambiguous
    assert game.parse("rechecked", ("CALL", "RAISE")) is None
    assert game.parse("raise\n\nFOLD", ("FOLD", "CALL")) is Act.FOLD


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ([{0: "FOLD"}], "FOLD is not legal after ''"),
        ([{1: "CALL"}], "seat 0 is to act"),
        ([{0: "BET"}], "'BET' is not a Leduc action"),
        ([{0: "RAISE"}, {1: "RAISE"}, {0: "RAISE"}], "RAISE is not legal after 'RR'"),
    ],
)
def test_illegal_actions_are_one_line_errors(actions, message):
    state = Leduc().new_episode(0)
    with pytest.raises(GameError, match=message) as raised:
        for a in actions:
            state.apply(a)
    assert "\n" not in str(raised.value)


def test_an_observation_of_a_seat_not_to_act_is_refused():
    with pytest.raises(GameError, match="seat 1 is not to act"):
        Leduc().new_episode(0).observe(1)


def test_deals_are_three_distinct_cards_drawn_by_seed():
    game = Leduc()
    deals = [d for seed in range(200) for d in game.new_episode(seed).deals]
    assert all(len(set(d)) == 3 and set(d) <= set(DECK) for d in deals)
    assert len(set(deals)) == 120  # every ordered triple of the six cards appears
    assert game.new_episode(5).deals == game.new_episode(5).deals
    rng = random.Random(derive(5, "deal"))
    assert game.new_episode(5).deals[0] == tuple(rng.sample(DECK, 3))
