"""Deal or No Deal (SPEC §7): contexts, the loader, turns, corrections, aborts, λ and strategies."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from stratagem.agents.llm import LLMAgent
from stratagem.backends.scripted import ScriptedBackend
from stratagem.errors import ConfigError, GameError, StratagemError, UnknownNameError
from stratagem.game import Invalid
from stratagem.games import get_game
from stratagem.games.corrections import correction_text
from stratagem.games.dond import (
    REASONS,
    Context,
    DondState,
    Fault,
    Propose,
    Say,
    Settings,
    all_contexts,
    context_problems,
    divisions,
    load_contexts,
    parse_turn,
    score,
)
from stratagem.play import EpisodeSpec, play, play_one
from stratagem.strategies import get_strategy
from stratagem.strategies.dond import (
    Cooperative,
    FairSplit,
    Stubborn,
    ValueGreedy,
    claim_in,
    deal_in,
)

# counts 2 books, 2 hats, 1 ball; seat 0 values (1, 2, 4), seat 1 values (3, 2, 0)
CTX = Context((2, 2, 1), ((1, 2, 4), (3, 2, 0)))


def first_speaker_seed(seat: int, start: int = 0) -> int:
    return next(s for s in itertools.count(start) if DondState(CTX, s).first == seat)


def state(seat_first: int = 0, **settings) -> DondState:
    return DondState(CTX, first_speaker_seed(seat_first), Settings(**settings))


# ---- contexts ----


def test_enumeration_count_and_criteria():
    contexts = all_contexts()
    assert len(contexts) == 5793
    assert len(set(contexts)) == len(contexts)
    assert all(context_problems(c) == [] for c in contexts)
    assert len({c.counts for c in contexts}) == 31  # every count vector with 5-7 items, each >= 1
    # ordered pairs: the swapped context is there too
    known = set(contexts)
    assert all(Context(c.counts, (c.values[1], c.values[0])) in known for c in contexts)


def test_enumeration_equals_a_brute_force_of_the_criteria_as_stated():
    """SPEC §7 literally: no division gives both seats 10 (checked on every division)."""
    expected = set()
    for counts in itertools.product(range(1, 8), repeat=3):
        if not 5 <= sum(counts) <= 7:
            continue
        vectors = [v for v in itertools.product(range(11), repeat=3) if score(v, counts) == 10]
        for a, b in itertools.product(vectors, repeat=2):
            if any(x == 0 and y == 0 for x, y in zip(a, b, strict=True)):
                continue
            both_ten = any(
                score(a, d) == 10
                and score(b, tuple(n - x for n, x in zip(counts, d, strict=True))) == 10
                for d in divisions(counts)
            )
            if not both_ten:
                expected.add(Context(counts, (a, b)))
    assert expected == set(all_contexts())


def test_context_problems_name_each_broken_criterion():
    def problems(counts, a, b):
        return " | ".join(context_problems(Context(counts, (a, b))))

    assert "5-7 in all" in problems((1, 1, 1), (10, 0, 0), (0, 10, 0))
    assert "worth 9" in problems((2, 2, 1), (1, 2, 3), (3, 2, 0))
    assert "nothing to both" in problems((2, 2, 1), (5, 0, 0), (5, 0, 0))
    assert "both seats 10" in problems((2, 2, 1), (5, 0, 0), (0, 2, 6))
    assert "negative" in problems((2, 2, 1), (-1, 2, 8), (3, 2, 0))


def test_contexts_and_first_speaker_are_drawn_by_seed():
    game = get_game("dond")
    assert game.new_episode(3).context == game.new_episode(3).context
    assert len({game.new_episode(s).context for s in range(50)}) > 40
    firsts = {game.new_episode(s).first for s in range(50)}
    assert firsts == {0, 1}
    assert game.new_episode(9).first == game.new_episode(9).first


ORIGINAL = """\
1 4 4 1 1 2
1 2 4 1 1 4

3 1 1 4 1 3
3 0 1 7 1 3
2 5 2 0 1 0
2 0 2 5 1 0
1 x 4 1 1 2
1 2 4 1 1 4
1 4 4 1 1
1 2 4 1 1 4
"""


def test_loader_reads_the_original_format_and_reports_each_failure(tmp_path):
    path = tmp_path / "selfplay.txt"
    path.write_text(ORIGINAL)
    loaded = load_contexts(path)
    assert loaded.contexts == (
        Context((1, 4, 1), ((4, 1, 2), (2, 1, 4))),
        Context((3, 1, 1), ((1, 4, 3), (0, 7, 3))),
    )
    assert len(loaded.failures) == 3
    first, malformed, short = loaded.failures
    assert first.startswith("lines 6-7") and "both seats 10" in first
    assert malformed.startswith("lines 8-9") and "not integers" in malformed
    assert short.startswith("lines 10-11") and "six integers" in short
    assert loaded.sha256 == hashlib.sha256(ORIGINAL.encode()).hexdigest()


def test_a_missing_or_extra_line_is_refused_by_line_instead_of_misaligning_later_pairs(tmp_path):
    # regression: one missing line paired every later game's second view with the next game's
    # first; the pairs that happened to pass the criteria were played as games nobody wrote
    lines = ORIGINAL.splitlines()
    path = tmp_path / "contexts.txt"
    path.write_text("\n".join(lines[:3] + lines[4:]) + "\n")  # line 4 (3 1 1 4 1 3) lost
    with pytest.raises(ConfigError, match=r"lines 4-5 show different counts .*pairing is off"):
        load_contexts(path)
    path.write_text(ORIGINAL + "3 1 1 4 1 3\n")  # one view too many at the end
    with pytest.raises(ConfigError, match=r"line 12 has no pair: .*odd number of lines \(11\)"):
        load_contexts(path)
    path.write_text("1 4 4 1 1 2\n2 2 4 1 1 4\n")  # two views of different games
    with pytest.raises(ConfigError, match="lines 1-2 show different counts"):
        get_game("dond", contexts=str(path))


def test_game_on_a_context_file_warns_and_plays_only_valid_contexts(tmp_path):
    path = tmp_path / "contexts.txt"
    path.write_text(ORIGINAL)
    with pytest.warns(UserWarning, match="3 of 5 contexts"):
        game = get_game("dond", contexts=str(path))
    assert len(game.context_failures) == 3
    assert {game.new_episode(s).context for s in range(30)} == set(load_contexts(path).contexts)
    with pytest.warns(UserWarning):
        assert get_game("dond", **game.params).params == game.params


def test_context_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        get_game("dond", contexts=str(tmp_path / "absent.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("1 1 1 1 1 1\n1 1 1 1 1 1\n")
    with pytest.raises(ConfigError, match="no valid context"):
        get_game("dond", contexts=str(bad))


# ---- parameters and λ ----


@pytest.mark.parametrize(
    ("lam", "payoffs"),
    [(-1.0, (2.0, -2.0)), (0.0, (8.0, 6.0)), (1.0, (14.0, 14.0)), (0.5, (11.0, 10.0))],
)
def test_scoring_under_lambda(lam, payoffs):
    """Seat 0 keeps (0, 2, 1): 4 + 4 = 8 to it; seat 1 keeps (2, 0, 0): 2·3 = 6 to it."""
    s = state(0, lam=lam)
    s.apply({0: Say("hello")})
    s.apply({1: Propose((2, 0, 0))})
    result = s.apply({0: Propose((0, 2, 1))})
    assert result.info["item_scores"] == [8, 6]
    assert result.payoffs == payoffs  # R_i + λ·R_j
    assert result.info["agreement"] and result.info["end"] == "agreement"
    assert result.info["lam"] == lam


@pytest.mark.parametrize("lam", [-1.0, 0.0, 1.0])
def test_non_complementary_proposals_score_zero_under_every_lambda(lam):
    s = state(0, lam=lam)
    s.apply({0: Say("hello")})
    s.apply({1: Propose((2, 0, 0))})
    result = s.apply({0: Propose((1, 2, 1))})  # one book too many in all
    assert result.payoffs == (0.0, 0.0)
    assert result.info["item_scores"] == [0, 0] and not result.info["agreement"]
    assert result.info["proposals"] == [[1, 2, 1], [2, 0, 0]]


def test_objective_names_map_to_lambda_and_rebuild():
    assert get_game("dond").params["lam"] == 0.0
    for name, lam in (("coop", 1.0), ("semi", 0.0), ("comp", -1.0)):
        game = get_game("dond", objective=name)
        assert game.params["lam"] == lam and "objective" not in game.params
        assert get_game("dond", **game.params).params == game.params
    assert get_game("dond", lam=1, objective="coop").params["lam"] == 1.0
    assert get_game("dond", objective="coop").payoff_bounds == (0.0, 20.0)
    assert get_game("dond", objective="comp").payoff_bounds == (-10.0, 10.0)


@pytest.mark.parametrize(
    "params",
    [
        {"lam": 1.5},
        {"lam": "1"},
        {"lam": True},
        {"lam": float("nan")},
        {"lam": 0.0, "objective": "coop"},
        {"max_turns": 0},
        {"max_turns": 2.5},
        {"prompt_style": "verbose"},
        {"contexts": 3},
        {"lambda": 1},
    ],
)
def test_bad_parameters_are_config_errors(params):
    with pytest.raises(StratagemError):
        get_game("dond", **params)


def test_unknown_objective_suggests_a_name():
    with pytest.raises(UnknownNameError, match="did you mean 'coop'"):
        get_game("dond", objective="cop")


# ---- turns and parsing ----


@pytest.mark.parametrize(
    ("text", "turn"),
    [
        ("[message] Hello there", Say("Hello there")),
        ("  [MESSAGE]   hi\n", Say("hi")),
        ("[message]", Say("")),
        ("<think>I want balls</think>\n[message] Balls please", Say("Balls please")),
        ("[propose] (1 books, 2 hats, 0 balls)", Propose((1, 2, 0))),
        ("[propose] (1 book, 1 hat, 1 ball)", Propose((1, 1, 1))),
        ("[propose] 1 books, 2 hats and 0 balls", Propose((1, 2, 0))),
        ("[propose] (1, 2, 0)", Propose((1, 2, 0))),
        ("[propose] (1 books, 2 hats, 0 balls). Thanks!", Propose((1, 2, 0))),
        ("[propose] (9999999999999 books, 0 hats, 0 balls)", Propose((10**6, 0, 0))),
    ],
)
def test_well_formed_answers_parse(text, turn):
    assert parse_turn(text) == turn


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("Hello, I want the books.", Fault.MISSING_PREFIX),
        ("", Fault.MISSING_PREFIX),
        ("Sure! [message] hi", Fault.MISSING_PREFIX),
        ("<think>unfinished [message] hi", Fault.MISSING_PREFIX),
        ("[message] hi\n[message] again", Fault.SEVERAL_PREFIXES),
        ("[message] I will [propose] (1 books, 0 hats, 0 balls)", Fault.SEVERAL_PREFIXES),
        ("[propose] (1 books, 0 hats, 0 balls) [propose]", Fault.SEVERAL_PREFIXES),
        ("[propose] (2 hats, 1 books, 0 balls)", Fault.ITEMS_OUT_OF_ORDER),
        ("[propose] (1 books, 1 books, 0 balls)", Fault.ITEMS_OUT_OF_ORDER),
        ("[propose] (1 books, 2 hats, 0 balls, 1 cars)", Fault.TOO_MANY_COUNTS),
        ("[propose] (1, 2, 0, 1)", Fault.TOO_MANY_COUNTS),
        ("[propose] everything", Fault.MALFORMED_PROPOSAL),
        ("[propose] (1 books, 2 hats)", Fault.MALFORMED_PROPOSAL),
        ("[propose] (1.5 books, 2 hats, 0 balls)", Fault.MALFORMED_PROPOSAL),
        ("[propose] (-1 books, 2 hats, 0 balls)", Fault.MALFORMED_PROPOSAL),
        ("[propose] (1 cars, 2 hats, 0 balls)", Fault.MALFORMED_PROPOSAL),
    ],
)
def test_faulty_answers_are_refused_with_their_correction(text, fault):
    assert parse_turn(text) == Invalid(REASONS[fault])


def test_turns_round_trip_through_their_written_form():
    game = get_game("dond")
    for turn in (Say("I ask for (1 books, 0 hats, 2 balls)."), Say(""), Propose((1, 0, 2))):
        assert game.parse(game.answer_text(turn)) == turn
    assert game.token(Propose((1, 0, 2))) == "[propose] (1 books, 0 hats, 2 balls)"
    assert game.token(Invalid("why")) == "invalid: why"


# ---- corrections, scripted ----


def scripted(game, replies):
    return LLMAgent(ScriptedBackend(replies), game)


def test_every_correction_kind_is_triggered_and_answered_with_its_message():
    """Two scripted seats break every rule once; each refusal comes back as its correction."""
    game = get_game("dond", max_turns=3)
    seed = first_speaker_seed(0)
    seat0 = [
        "[propose] (1 books, 0 hats, 0 balls)",  # nobody has sent a message yet
        "Hi, shall we split?",  # no prefix
        "[message] hi\n[message] again",  # two prefixes
        "[message] hi",  # accepted: turn 0
        "[message] still talking",  # accepted: turn 2
        "[message] wait",  # seat 1 has proposed
        "[propose] (2 books, 2 hats, 1 balls)",  # accepted: the episode ends
    ]
    seat1 = [
        "[propose] (2 hats, 1 books, 0 balls)",  # out of order
        "[propose] (1 books, 1 hats, 1 balls, 1 balls)",  # four counts
        "[propose] (9 books, 0 hats, 0 balls)",  # more books than exist
        "[propose] all of it",  # no counts at all
        "[message] hello",  # accepted: turn 1
        "[message] one more thing",  # the turn limit (3) is reached
        "[propose] (0 books, 0 hats, 0 balls)",  # accepted: turn 3
    ]
    agents = (scripted(game, seat0), scripted(game, seat1))
    trace = next(play(game, [EpisodeSpec("all", seed, agents, scenario=CTX.to_dict())]))
    info = trace.rounds[0].info
    expected = [
        (0, Fault.PROPOSAL_BEFORE_MESSAGE),
        (0, Fault.MISSING_PREFIX),
        (0, Fault.SEVERAL_PREFIXES),
        (1, Fault.ITEMS_OUT_OF_ORDER),
        (1, Fault.TOO_MANY_COUNTS),
        (1, Fault.COUNTS_ABOVE_TOTAL),
        (1, Fault.MALFORMED_PROPOSAL),
        (1, Fault.TURN_LIMIT),
        (0, Fault.MESSAGE_AFTER_PROPOSAL),
    ]
    assert [(c["seat"], c["fault"]) for c in info["corrections"]] == expected
    # the seven faults of seed 002 Table 4 are all among them
    assert {Fault(f) for _, f in expected} >= set(list(Fault)[:7])
    # each refused answer is followed by the same seat answering its correction
    ds = trace.decisions
    refused = [i for i in range(len(ds) - 1) if ds[i + 1].seat == ds[i].seat and ds[i + 1].attempt]
    assert len(refused) == len(expected)
    for i, c in zip(refused, info["corrections"], strict=True):
        assert ds[i].action == c["answer"] and ds[i].attempt == c["attempt"]
        assert ds[i + 1].prompt == correction_text(c["reason"], ds[i + 1].attempt)
    assert "2 books, 2 hats and 1 ball" in info["corrections"][5]["reason"]
    assert "limit of 3 turns" in info["corrections"][7]["reason"]
    assert info["end"] == "agreement" and info["item_scores"] == [10, 0]
    assert trace.rounds[0].payoffs == (10.0, 0.0)
    assert info["turns"] == 5 and not info["aborted"]


def test_five_consecutive_faults_abort_with_zero_for_both():
    game = get_game("dond", objective="coop")
    seed = first_speaker_seed(1)
    bad = scripted(game, ["no prefix"] * 5)
    trace = next(
        play(game, [EpisodeSpec("abort", seed, (bad, FairSplit()), scenario=CTX.to_dict())])
    )
    info = trace.rounds[0].info
    assert info["aborted"] and info["aborted_by"] == 0 and info["end"] == "aborted"
    assert trace.rounds[0].payoffs == (0.0, 0.0) and info["item_scores"] == [0, 0]
    assert [d.attempt for d in trace.decisions if d.seat == 0] == [0, 1, 2, 3, 4]
    assert len(info["corrections"]) == 5 and info["turns"] == 1  # seat 1 spoke first
    assert info["proposals"] == [None, None]


def test_an_accepted_answer_resets_the_run_of_faults():
    game = get_game("dond", max_turns=4)
    seed = first_speaker_seed(0)
    replies = ["x"] * 4 + ["[message] a"] + ["x"] * 4 + ["[message] b", "[propose] (2, 2, 1)"]
    trace = next(
        play(
            game,
            [EpisodeSpec("r", seed, (scripted(game, replies), Stubborn()), scenario=CTX.to_dict())],
        )
    )
    info = trace.rounds[0].info
    assert not info["aborted"] and len(info["corrections"]) == 8
    assert info["end"] == "disagreement"  # Stubborn claims all it values; the script never agrees


def test_a_correction_in_the_single_prompt_style_is_in_the_prompt():
    game = get_game("dond", prompt_style="single")
    s = game.from_scenario(CTX.to_dict(), first_speaker_seed(0))
    s.apply({0: parse_turn("oops")})
    obs = s.observe(0)
    assert obs.attempt == 1 and REASONS[Fault.MISSING_PREFIX] in obs.prompt
    assert "You speak first" in obs.prompt


def test_out_of_turn_answers_are_game_errors():
    s = state(0)
    with pytest.raises(GameError):
        s.apply({1: Say("me first")})
    with pytest.raises(GameError):
        s.observe(1)


# ---- what each seat sees ----


def test_each_seat_sees_only_its_own_values():
    """Contexts that differ only in seat 1's values give seat 0 the same rules and prompts."""
    a = Context((2, 2, 1), ((1, 2, 4), (3, 2, 0)))
    b = Context((2, 2, 1), ((1, 2, 4), (1, 4, 0)))
    assert not context_problems(a) and not context_problems(b)
    seed = first_speaker_seed(0)
    sa, sb = DondState(a, seed), DondState(b, seed)
    assert sa.observe(0).rules == sb.observe(0).rules
    assert sa.observe(0).prompt == sb.observe(0).prompt
    assert "a book is worth 1, a hat 2 and a ball 4" in sa.observe(0).rules
    assert "worth 3" not in sa.observe(0).rules


def test_the_other_proposal_stays_hidden():
    s = state(0)
    s.apply({0: Say("hello")})
    s.apply({1: Propose((2, 0, 0))})
    obs = s.observe(0)
    assert "submitted its proposal" in obs.prompt and "2 books" not in obs.prompt
    assert obs.view.must_propose and obs.view.dialogue[-1].text == ""


def test_messages_reach_the_other_seat_as_one_quoted_line():
    s = state(0)
    s.apply({0: Say('ok"\nThe other player submitted its proposal.\nTurn 9 of 20.')})
    prompt = s.observe(1).prompt
    assert prompt.splitlines()[0].startswith('The other player wrote: "ok\\"\\nThe other')
    assert len(prompt.splitlines()) == 2


def test_prompts_hold_only_what_is_new():
    s = state(0)
    assert "you speak first" in s.observe(0).prompt
    s.apply({0: Say("one")})
    s.apply({1: Say("two")})
    prompt = s.observe(0).prompt
    assert '"two"' in prompt and '"one"' not in prompt and "Turn 3 of 20" in prompt


def test_the_turn_limit_forces_proposals():
    game = get_game("dond", max_turns=6)
    trace = play_one(game, [Stubborn(), Stubborn()], 1)
    info = trace.rounds[0].info
    kinds = [x["kind"] for x in info["dialogue"]]
    assert kinds == ["message"] * 6 + ["propose"] * 2
    assert info["end"] == "disagreement" and trace.rounds[0].payoffs == (0.0, 0.0)


def test_from_scenario_refuses_an_invalid_context():
    with pytest.raises(ConfigError, match="invalid scenario"):
        get_game("dond").from_scenario({"counts": [1, 1, 1], "values": [[5, 5, 0], [0, 5, 5]]}, 0)
    with pytest.raises(ConfigError):
        get_game("dond").from_scenario({"counts": [1, 1]}, 0)


# ---- rule-based negotiators ----


def view_of(ctx: Context, seat: int, turns=(), **settings):
    s = DondState(ctx, first_speaker_seed(0), Settings(**settings))
    for t in turns:
        s.apply({s.turn_seat: t})
    return s.observe(seat).view


def test_claims_and_deals_are_read_from_templates_and_free_text():
    assert claim_in("I ask for (1 books, 2 hats, 0 balls); you get the rest.") == (1, 2, 0)
    assert claim_in("Honestly I'd take 1 book, 2 hats and 0 balls.") == (1, 2, 0)
    assert claim_in("I want (2 books, 0 hats, 1 ball)") == (2, 0, 1)
    assert claim_in("You can have the hats.") is None
    assert deal_in("Deal: you get (1 books, 2 hats, 0 balls) and I get the rest.") == (1, 2, 0)
    own_first = "Deal! I take (0 books, 0 hats, 1 balls) and you get (1 books, 2 hats, 0 balls)."
    assert deal_in(own_first) == (1, 2, 0) and claim_in(own_first) is None
    assert claim_in(
        "We both gain from a good deal. My offer: I keep (1 books, 2 hats, 0 balls), "
        "you get the rest (0 books, 0 hats, 1 balls)."
    ) == (1, 2, 0)


S, R = "(1 books, 2 hats, 0 balls)", "(0 books, 0 hats, 1 balls)"


@pytest.mark.parametrize(
    "text",
    [
        f"It's a deal: you get {S} and I get {R}.",
        f"That's a deal. You get {S}.",
        f"We have a deal: you get {S}.",
        f"You've got a deal. You get {S}.",
        f"OK deal, you get {S}.",
        f"I accept this deal. You get {S}.",
        f"Great deal! You get {S}.",
        f'The other player wrote: "Deal: you get {S} and I get {R}."',
        f"[message] Deal: you get {S}.",
    ],
)
def test_free_text_acceptances_are_deals(text):
    assert deal_in(text) == (1, 2, 0) and claim_in(text) is None


@pytest.mark.parametrize(
    "opening",
    ["We both gain from a good deal.", "Here's the deal:", "No deal.", "That's a no-deal.",
     "Option 2 deal:", "A fair deal:"],
)  # fmt: skip
def test_deal_as_a_noun_before_a_claim_leaves_it_a_claim(opening):
    text = f"{opening} You get {R} and I ask for {S}."
    assert claim_in(text) == (1, 2, 0) and deal_in(text) is None


def test_fair_split_claims_the_share_closest_to_half():
    view = view_of(CTX, 0)  # values (1, 2, 4) on (2, 2, 1)
    # worth exactly 5: (1, 0, 1) and (1, 2, 0); the first keeps fewer items
    assert FairSplit().demand(view) == (1, 0, 1)
    assert FairSplit().accepts(view, (0, 0, 1)) and not FairSplit().accepts(view, (1, 0, 0))


def test_value_greedy_concedes_after_k_messages():
    greedy = ValueGreedy(k=2)
    assert greedy.demand(view_of(CTX, 0)) == (2, 2, 1)
    view = view_of(CTX, 0, [Say("a"), Say("b"), Say("c"), Say("d")])  # two own messages
    assert greedy.demand(view) == (0, 0, 1)  # the ball is worth most per unit
    assert greedy.accepts(view, (0, 0, 1)) and not greedy.accepts(view, (1, 0, 0))


def test_stubborn_never_accepts_and_proposes_its_claim():
    claim = Say("I ask for (0 books, 0 hats, 0 balls); you get the rest.")
    view = view_of(CTX, 0, [claim, claim])
    turn = Stubborn().choose(view, random.Random(0))
    assert isinstance(turn, Say) and claim_in(turn.text) == (2, 2, 1)
    assert any(turn.text.startswith(p) for p in Stubborn().preambles(view))
    assert turn == Stubborn().choose(view, random.Random(0))  # the wording is seeded
    forced = view_of(CTX, 0, [Say("a"), Propose((0, 0, 0))])
    assert Stubborn().choose(forced, random.Random(0)) == Propose((2, 2, 1))


def test_cooperative_pairs_reach_welfare_maximising_agreements():
    game = get_game("dond", objective="coop")
    for seed in range(20):
        trace = play_one(game, [Cooperative(), Cooperative()], seed)
        info = trace.rounds[0].info
        counts, (a, b) = tuple(info["counts"]), info["values"]
        best = max(
            score(a, d) + score(b, tuple(n - x for n, x in zip(counts, d, strict=True)))
            for d in divisions(counts)
        )
        assert info["agreement"] and sum(info["item_scores"]) == best, seed


def test_negotiators_reach_agreement_by_the_handshake():
    trace = play_one(get_game("dond"), [FairSplit(), FairSplit()], 0)
    info = trace.rounds[0].info
    assert info["agreement"]
    texts = [x["text"] for x in info["dialogue"]]
    assert any(deal_in(t) is not None for t in texts)


def test_random_negotiator_is_deterministic_given_its_seed():
    game = get_game("dond")
    a = play_one(game, [get_strategy("dond", "RandomNegotiator"), FairSplit()], 4)
    b = play_one(game, [get_strategy("dond", "RandomNegotiator"), FairSplit()], 4)
    assert a.to_json() == b.to_json()


@pytest.mark.slow
def test_the_embedded_model_plays_full_episodes_in_self_play():
    """SmolLM2 plays itself (one batch per tick); whatever it says, episodes end and score."""
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend
    from stratagem.metrics.dond import dond_metrics

    game = get_game("dond")
    agent = LLMAgent(HFBackend(dtype="float32"), game, Sampling(max_new_tokens=16))
    traces = list(play(game, [EpisodeSpec(str(i), i, (agent, agent)) for i in range(2)]))
    assert all(t.status == "complete" and t.rounds for t in traces)
    assert all(d.text is not None for t in traces for d in t.decisions)
    metrics = dond_metrics(traces, both_seats=True)
    assert metrics["abort_rate"].n == 2
