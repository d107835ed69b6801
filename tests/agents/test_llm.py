"""LLM agents on the scripted backend: batching, fallback, statuses, exact Kuhn exploitability."""

from __future__ import annotations

import pytest

from stratagem.agents.llm import LLMAgent
from stratagem.backends.scripted import ScriptedBackend, ScriptExhausted
from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.metrics.kuhn import exact_exploitability
from stratagem.play import EpisodeSpec, play


def always(text):
    return lambda chat: text


def test_one_backend_call_per_tick_across_all_episodes_and_opponents():
    game = get_game("ipd")
    backend = ScriptedBackend(always("Let me think.\nCOOPERATE"))
    ev = evaluate(game, LLMAgent(backend, game), episodes=3)
    n_episodes = 3 * 11  # 11 opponents in the IPD pools
    assert len(ev.traces) == n_episodes
    assert backend.calls == [n_episodes] * 8  # one call per round, every live episode in it
    assert ev.metrics["exploit"].value == pytest.approx(5.0)  # it always cooperates


def test_self_play_is_one_call_per_tick():
    game = get_game("negotiation")
    backend = ScriptedBackend(always("5"))
    agent = LLMAgent(backend, game)
    specs = [EpisodeSpec(str(i), i, (agent, agent)) for i in range(4)]
    traces = list(play(game, specs))
    assert backend.calls == [8] * 4  # 4 episodes × 2 seats, one call per round
    assert all(r.payoffs == (5.0, 5.0) for t in traces for r in t.rounds)


def test_sequential_game_batches_whatever_is_pending():
    game = get_game("kuhn")
    backend = ScriptedBackend(always("BET\nCALL"))  # last line decides: CALL is illegal at open
    agent = LLMAgent(backend, game)
    specs = [EpisodeSpec(str(i), i, (agent, agent)) for i in range(5)]
    traces = list(play(game, specs))
    assert sum(backend.calls) == sum(len(t.decisions) for t in traces)
    assert max(backend.calls) == 5  # one decision per episode per tick


def test_unparseable_answers_use_the_constrained_fallback():
    game = get_game("ipd")
    backend = ScriptedBackend(
        always("I am not sure."), probs=lambda chat, legal: {"COOPERATE": 0.2, "DEFECT": 0.8}
    )
    agent = LLMAgent(backend, game)
    trace = next(play(game, [EpisodeSpec("e", 0, (agent, agent))]))
    assert {d.status for d in trace.decisions} == {"fallback"}
    assert {d.action for d in trace.decisions} == {"DEFECT"}
    assert backend.prob_calls == [2] * 8  # the fallback is batched too
    assert trace.decisions[0].probs == {"COOPERATE": 0.2, "DEFECT": 0.8}
    # the fallback chat shows the model its own answer and asks for the final action
    assert trace.decisions[0].text == "I am not sure."


def test_parse_failure_rate_matches_the_script_exactly():
    game = get_game("ipd")
    replies = iter(["COOPERATE", "no idea"] * 1000)
    backend = ScriptedBackend(lambda chat: next(replies))
    agent = LLMAgent(backend, game, fallback="none")
    from stratagem.strategies import get_strategy

    traces = list(
        play(
            game,
            [
                EpisodeSpec(str(i), i, (agent, get_strategy("ipd", "TitForTat")), {"seat": 0})
                for i in range(5)
            ],
        )
    )
    statuses = [d.status for t in traces for d in t.decisions if d.seat == 0]
    assert statuses.count("failed") == statuses.count("ok") == 20
    from stratagem.metrics.sepo import decision_rates

    assert decision_rates(traces)["parse_failure_rate"].value == 0.5


def test_script_running_out_is_an_error_not_a_silent_default():
    game = get_game("ipd")
    agent = LLMAgent(ScriptedBackend(["COOPERATE"]), game)
    with pytest.raises(ScriptExhausted):
        list(play(game, [EpisodeSpec("e", 0, (agent, agent))]))


def test_agent_errors_can_be_recorded_per_episode():
    game = get_game("ipd")
    agent = LLMAgent(ScriptedBackend(["COOPERATE"] * 3), game)
    from stratagem.strategies import get_strategy

    specs = [EpisodeSpec(str(i), i, (agent, get_strategy("ipd", "TitForTat"))) for i in range(2)]
    traces = list(play(game, specs, on_error="record"))
    assert [t.status for t in traces] == ["error", "error"]
    assert "ScriptExhausted" in traces[0].error


def test_exact_kuhn_exploitability_of_an_llm_agent_reads_constrained_probs():
    game = get_game("kuhn")
    uniform = ScriptedBackend(always("PASS"), probs=lambda chat, legal: {a: 0.5 for a in legal})
    assert exact_exploitability(LLMAgent(uniform, game)) == pytest.approx(11 / 24)
    assert uniform.prob_calls == [12]  # all 12 information sets in one batch

    def always_aggressive(chat, legal):
        return {a: float(a in ("BET", "CALL")) for a in legal}

    bettor = ScriptedBackend(always("BET"), probs=always_aggressive)
    assert exact_exploitability(LLMAgent(bettor, game)) == pytest.approx(1 / 3)


def test_decisions_record_raw_text_prompt_and_tokens():
    game = get_game("auction")
    agent = LLMAgent(ScriptedBackend(always("My value is high.\nHIGH")), game)
    trace = next(play(game, [EpisodeSpec("e", 0, (agent, agent))]))
    d = trace.decisions[0]
    assert d.text == "My value is high.\nHIGH" and d.action == "HIGH" and d.status == "ok"
    assert "worth" in d.prompt and d.tokens == 5


def test_free_form_turns_pass_a_completion_check_to_the_backend():
    from stratagem.games.bargaining import Bargaining

    game = Bargaining()
    seen = {}

    class Spy(ScriptedBackend):
        def generate(self, chats, sampling, *, seeds=None, stop=None):
            seen["done"] = stop
            return super().generate(chats, sampling, seeds=seeds, stop=stop)

    answer = "Thought: x\nCode:\n```py\nmake_offer(price=100)\nwait_for_response()\n```"
    agent = LLMAgent(Spy(always(answer)), game)
    obs = game.new_episode(0).observe(0)
    decision = agent.act([obs])[0]
    assert decision.status == "ok" and seen["done"] is not None
    assert seen["done"][0](answer) and not seen["done"][0]("Thought: still thinking")
    # a closed block that does not parse yet is not a stop: only a complete answer is
    assert not seen["done"][0]("Thought: x\nCode:\n```py\nmake_offer(price=1")
