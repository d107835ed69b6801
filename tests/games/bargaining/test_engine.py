"""Engine invariants, privacy, limits and bad output (RELIABILITY G1-G4)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.agent import Decision
from stratagem.agents.llm import LLMAgent
from stratagem.backends.scripted import ScriptedBackend
from stratagem.games.bargaining import BUYER, SELLER, Bargaining, Call, Invalid, Turn
from stratagem.games.bargaining.catalog import Item, Scenario
from stratagem.play import EpisodeSpec, play

ITEM = Item("Test lamp", "home", "A lamp.", 50.0, 150.0)
WAIT = Call("wait_for_response")


def scenario(seller=80.0, buyer=120.0):
    return Scenario(0, ITEM, seller, buyer, "GFT" if buyer > seller else "NGFT")


def offer(p):
    return Turn((Call("make_offer", (("price", p),)), WAIT))


ACCEPT = Turn((Call("respond_to_offer", (("response", True),)),))
REJECT = Turn((Call("respond_to_offer", (("response", False),)),))

calls = st.one_of(
    st.builds(offer, st.floats(1, 400).map(lambda x: round(x, 2))),
    st.just(ACCEPT),
    st.just(REJECT),
    st.just(Turn((Call("quit_negotiation"),))),
    st.just(Turn((WAIT,))),
    st.just(Turn((Call("send_message", (("content", "hello"),)), WAIT))),
    st.just(Turn((Call("search_price"), WAIT))),
    st.builds(
        lambda d: Turn((Call("wait_for_time_period", (("duration", d),)),)), st.floats(0.5, 48)
    ),
    st.builds(Invalid, st.sampled_from(["no code block", "unknown tool 'eval'"])),
)


@settings(max_examples=5000, deadline=None)
@given(st.floats(10, 300), st.floats(10, 300), st.lists(calls, min_size=1, max_size=40))
def test_invariants_under_random_play(v_s, v_b, turns):
    game = Bargaining([ITEM])
    state = game.from_scenario(scenario(round(v_s, 2), round(v_b, 2)), seed=1)
    result = None
    for turn in turns:
        if not state.to_act():
            break
        seat = state.to_act()[0]
        standing_before = dict(state.standing)
        result = state.apply({seat: turn})
        if state.price is not None:
            # the deal price is the counterpart's open offer at the moment of acceptance
            assert state.price == standing_before[1 - state.accepted_by]
    times = [(e.time, e.seq) for e in state.log]
    assert times == sorted(times)
    deals = [e for e in state.log if e.kind == "respond" and e.data["accept"]]
    assert len(deals) <= 1
    if state.done:
        assert state.log[-1].kind in (
            "respond",
            "quit",
            "wait",
            "wait_time",
            "listing",
            "offer",
            "message",
            "search",
            "fallback",
        )
        terminal = next(
            (
                i
                for i, e in enumerate(state.log)
                if e.kind == "quit" or (e.kind == "respond" and e.data["accept"])
            ),
            None,
        )
        if terminal is not None:
            assert terminal == len(state.log) - 1  # nothing after a terminal event
        assert result is not None
        u_s, u_b = result.payoffs
        if state.price is None:
            assert (u_s, u_b) == (0.0, 0.0)
        else:
            assert abs(u_s - (state.price - state.setup.seller_value)) < 1e-6
            assert abs(u_b - (state.setup.buyer_value - state.price)) < 1e-6


def test_private_values_and_thoughts_never_reach_the_other_seat():
    sentinel = "SECRET-THOUGHT-9931"
    seller_value, buyer_value = 1234.57, 7431.17
    item = Item("Watch", "collectibles", "A watch.", 1000.0, 9000.0)
    game = Bargaining([item])

    def reply(chat):
        return (
            f"Thought: my value is 7431.17 and {sentinel}\nCode:\n```py\n"
            "make_offer(price=5000)\nwait_for_response()\n```"
        )

    buyer = LLMAgent(ScriptedBackend(reply), game)
    seen = []

    class RecordingSeller:
        name = "recorder"

        def act(self, batch):
            seen.extend(batch)
            return [Decision(Turn((Call("make_offer", (("price", 8000.0),)), WAIT))) for _ in batch]

    spec = EpisodeSpec(
        "e",
        0,
        (RecordingSeller(), buyer),
        scenario=Scenario(0, item, seller_value, buyer_value, "GFT"),
    )
    trace = next(play(game, [spec]))
    assert trace.rounds[0].info["end_reason"] == "round_limit"
    assert len(seen) == 11  # listing + 10 rounds
    for obs in seen:
        text = obs.rules + obs.prompt + repr(obs.view)
        assert "7431.17" not in text and sentinel not in text


def test_message_only_agent_ends_at_the_round_limit():
    game = Bargaining([ITEM])
    talker = Turn((Call("send_message", (("content", "hmm"),)), WAIT))

    class Talker:
        name = "talker"

        def act(self, batch):
            return [Decision(offer(140.0) if o.view.listing else talker) for o in batch]

    trace = next(play(game, [EpisodeSpec("e", 0, (Talker(), Talker()), scenario=scenario())]))
    info = trace.rounds[0].info
    assert info["end_reason"] == "round_limit" and info["rounds"] == 10 and not info["deal"]


def test_long_waits_are_refused_and_clocks_advance():
    game = Bargaining([ITEM])
    assert isinstance(game.parse("Code:\n```py\nwait_for_time_period(duration=1e9)\n```"), Invalid)
    state = game.from_scenario(scenario(), 0)
    state.apply({SELLER: offer(140.0)})
    state.apply({BUYER: Turn((Call("wait_for_time_period", (("duration", 30.0),)),))})
    assert state.clock == 31.0  # the listing took 1 unit, the buyer then waited 30
    state.apply({SELLER: Turn((WAIT,))})
    assert [e.time for e in state.log] == sorted(e.time for e in state.log)


def test_garbage_gets_one_correction_then_the_fallback():
    game = Bargaining([ITEM])
    seller = LLMAgent(ScriptedBackend(lambda chat: "I refuse to use tools."), game)
    buyer = LLMAgent(ScriptedBackend(lambda chat: "still no tools"), game)
    trace = next(play(game, [EpisodeSpec("e", 0, (seller, buyer), scenario=scenario())]))
    info = trace.rounds[0].info
    assert info["end_reason"] == "round_limit"
    # every turn: one failed answer, one failed correction, then the fallback
    turns = 1 + 2 * 10
    assert info["parse_failures"] == [11 * 2, 10 * 2]
    assert info["fallbacks"] == [11, 10]
    assert sum(d.status == "failed" for d in trace.decisions) == 2 * turns
    assert info["offers"][0] == [ITEM.high]  # the listing fallback lists at the catalog high
    corrections = [d.prompt for d in trace.decisions if "could not be used" in (d.prompt or "")]
    assert len(corrections) == turns
    from stratagem.trace import validate_line

    validate_line(trace.to_json())


def test_every_other_answer_garbage_continues_with_corrections():
    game = Bargaining([ITEM])
    answers = iter(
        ["nonsense", "Code:\n```py\nmake_offer(price=140)\nwait_for_response()\n```"] * 100
    )
    seller = LLMAgent(ScriptedBackend(lambda chat: next(answers)), game)
    answers_b = iter(
        ["nonsense", "Code:\n```py\nmake_offer(price=60)\nwait_for_response()\n```"] * 100
    )
    buyer = LLMAgent(ScriptedBackend(lambda chat: next(answers_b)), game)
    trace = next(play(game, [EpisodeSpec("e", 0, (seller, buyer), scenario=scenario())]))
    info = trace.rounds[0].info
    assert info["fallbacks"] == [0, 0]
    assert info["parse_failures"] == [11, 10]
    rate = sum(d.status == "failed" for d in trace.decisions) / len(trace.decisions)
    assert rate == 0.5
