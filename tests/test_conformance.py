"""Every registered game obeys the contract; a new game is covered without writing a test."""

from __future__ import annotations

import random

import pytest

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.game import HasHeldOutScenarios, HasPayoffBounds, chat_for
from stratagem.games import GAMES, get_game
from stratagem.metrics.sepo import SEPOGame
from stratagem.play import EpisodeSpec, play, play_one
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy

GAME_NAMES = GAMES.names()


class RandomLegal:
    """Uniform over the legal tokens, seeded by the observation."""

    name = "RandomLegal"

    def __init__(self, game):
        self.game = game

    def act(self, batch):
        return [Decision(random_action(self.game, o, random.Random(o.seed))) for o in batch]


class FirstLegal:
    name = "FirstLegal"

    def __init__(self, game):
        self.game = game

    def act(self, batch):
        return [
            Decision(random_action(self.game, o, random.Random(0)))
            if not o.legal
            else Decision(self.game.parse(o.legal[0], o.legal))
            for o in batch
        ]


def random_action(game, obs, rng):
    """A uniformly random legal token, or the game's own sampler for free-form turns."""
    if not obs.legal:
        return game.sample_action(obs, rng)
    return game.parse(rng.choice(obs.legal), obs.legal)


def expected_rounds(game, trace) -> bool:
    """A SEPO game plays exactly its rounds; any other game at least one."""
    return len(trace.rounds) == game.rounds if isinstance(game, SEPOGame) else bool(trace.rounds)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_random_play_ends_with_payoffs_in_bounds(name):
    game = get_game(name)
    lo, hi = game.payoff_bounds if isinstance(game, HasPayoffBounds) else (-1e300, 1e300)
    for seed in range(30):
        trace = play_one(game, [RandomLegal(game), RandomLegal(game)], seed)
        assert expected_rounds(game, trace)
        for r in trace.rounds:
            assert all(lo <= p <= hi for p in r.payoffs), r


@pytest.mark.parametrize("name", GAME_NAMES)
def test_episode_stepped_by_hand_equals_play(name):
    """Driving an ``Episode`` one observation at a time gives the trace ``play`` gives."""
    game = get_game(name)
    pools = get_pools(name)
    for seed in range(5):
        a, b = get_strategy(name, pools.train[0]), get_strategy(name, pools.exploit[-1])
        expected = play_one(game, [a, b], seed, episode_id="x")
        episode = Episode(game, "x", seed, (a.name, b.name))
        while not episode.done:
            for obs in episode.waiting():
                episode.submit(obs.seat, (a, b)[obs.seat].act([obs])[0])
            episode.step()
        assert episode.trace().to_json() == expected.to_json()


@pytest.mark.parametrize("name", GAME_NAMES)
def test_each_seat_sees_one_growing_chat(name):
    """SPEC §4.1: system, then alternating user/assistant turns holding the seat's own answers;
    each new user turn holds only what is new (it never repeats an earlier one)."""
    game = get_game(name)
    episode = Episode(game, "chat", 5, ("a", "b"))
    agents = (RandomLegal(game), RandomLegal(game))
    previous: dict[int, list] = {0: [], 1: []}
    while not episode.done:
        for obs in episode.waiting():
            chat = chat_for(obs)
            assert chat[0] == {"role": "system", "content": obs.rules}
            pairs = len(previous[obs.seat]) // 2
            assert [m["role"] for m in chat[1:]] == ["user", "assistant"] * pairs + ["user"]
            assert chat[1:-1] == previous[obs.seat] or not previous[obs.seat]
            decision = agents[obs.seat].act([obs])[0]
            episode.submit(obs.seat, decision)
            answer = episode.chat(obs.seat)[-1].content
            previous[obs.seat] = [*chat[1:], {"role": "assistant", "content": answer}]
        episode.step()
    for seat in (0, 1):
        users = [m["content"] for m in previous[seat] if m["role"] == "user"]
        assert len(users) >= 1


@pytest.mark.parametrize("name", GAME_NAMES)
def test_single_prompt_style_keeps_no_history(name):
    game = get_game(name, prompt_style="single")
    assert game.params["prompt_style"] == "single"
    episode = Episode(game, "single", 5, ("a", "b"))
    agents = (RandomLegal(game), RandomLegal(game))
    steps = 0
    while not episode.done and steps < 6:
        for obs in episode.waiting():
            assert obs.history == ()
            episode.submit(obs.seat, agents[obs.seat].act([obs])[0])
        episode.step()
        steps += 1
    assert episode.trace().params["prompt_style"] == "single"


@pytest.mark.parametrize("name", GAME_NAMES)
def test_same_seed_same_trace(name):
    game = get_game(name)
    a = play_one(game, [RandomLegal(game), RandomLegal(game)], 7)
    b = play_one(game, [RandomLegal(game), RandomLegal(game)], 7)
    c = play_one(game, [RandomLegal(game), RandomLegal(game)], 8)
    assert a.to_json() == b.to_json()
    assert a.to_json() != c.to_json()


@pytest.mark.parametrize("name", GAME_NAMES)
def test_every_legal_token_parses_to_itself(name):
    game = get_game(name)
    state = game.new_episode(3)
    rng = random.Random(0)
    while state.to_act():
        actions = {}
        for seat in state.to_act():
            obs = state.observe(seat)
            if not obs.legal:  # free-form turns: a well-formed answer parses back to its action
                for _ in range(20):
                    action = game.sample_action(obs, rng)
                    assert game.token(game.parse(game.answer_text(action), ())) == game.token(
                        action
                    )
                actions[seat] = game.sample_action(obs, rng)
                continue
            for token in obs.legal:
                for text in (token, token.lower(), f"I choose:\n**{token}**.", f"x\n\n{token}\n"):
                    parsed = game.parse(text, obs.legal)
                    assert parsed is not None and game.token(parsed) == token, text
            actions[seat] = game.parse(obs.legal[-1], obs.legal)
        state.apply(actions)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_first_observation_depends_only_on_own_private_information(name):
    """Episodes that deal a seat the same private information show it the same first prompt."""
    game = get_game(name)
    for seat in (0, 1):
        seen: dict[object, str] = {}
        for seed in range(200):
            state = game.new_episode(seed)
            agent = FirstLegal(game)  # public history then depends on nothing private
            while seat not in state.to_act():
                state.apply({s: agent.act([state.observe(s)])[0].action for s in state.to_act()})
            key = repr(state.private(seat))
            prompt = state.observe(seat).prompt
            assert seen.setdefault(key, prompt) == prompt, (seed, key)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_every_pool_member_plays_a_full_episode(name):
    game = get_game(name)
    pools = get_pools(name)
    names = [n for _, members in pools.items() for n in members]
    specs = [
        EpisodeSpec(f"{a}/{b}", derive(0, a, b), (get_strategy(name, a), get_strategy(name, b)))
        for a in names
        for b in names
    ]
    traces = list(play(game, specs))
    assert len(traces) == len(names) ** 2
    assert all(expected_rounds(game, t) and t.status == "complete" for t in traces)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_strategy_probabilities_are_distributions_over_legal_actions(name):
    game = get_game(name)
    from stratagem.strategies import strategies

    for strategy_name in strategies(name).names():
        strategy = get_strategy(name, strategy_name)
        state = game.new_episode(11)
        while state.to_act():
            actions = {}
            for seat in state.to_act():
                obs = state.observe(seat)
                probs = strategy.probabilities(obs.view)
                if probs is None:  # a deterministic free-form strategy
                    actions[seat] = strategy.act([obs])[0].action
                    continue
                assert abs(sum(probs.values()) - 1) < 1e-9
                assert {game.token(a) for a, p in probs.items() if p > 0} <= set(obs.legal)
                actions[seat] = strategy.act([obs])[0].action
            state.apply(actions)


@pytest.mark.parametrize("name", GAME_NAMES)
def test_training_scenarios_are_seeded_and_played_as_drawn(name):
    """A game that holds scenarios out for evaluation (HasHeldOutScenarios) draws a training
    scenario from (split seed, seed) alone, and an episode given it plays exactly it."""
    game = get_game(name)
    if not isinstance(game, HasHeldOutScenarios):
        pytest.skip(f"{name} holds no scenarios out")
    drawn = [game.training_scenario(42, seed) for seed in range(40)]
    assert drawn == [get_game(name).training_scenario(42, seed) for seed in range(40)]
    assert len({repr(s) for s in drawn}) > 1
    agents = (RandomLegal(game), RandomLegal(game))
    (trace,) = play(game, [EpisodeSpec("e", 7, agents, {}, drawn[0])])
    assert trace.scenario == game.from_scenario(drawn[0], 7).scenario()
