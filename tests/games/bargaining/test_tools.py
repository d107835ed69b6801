"""The tool-call parser against the hostile corpus, under an audit hook (RELIABILITY F1-F7)."""

from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.games.bargaining.tools import FILENAME, ParseError, parse_json_calls, parse_turn
from tests.games.bargaining.corpus import CASES

EVENTS: list[tuple[str, tuple]] = []
_recording = [False]


def _hook(event, args):
    if _recording[0]:
        EVENTS.append((event, args))


sys.addaudithook(_hook)
FORBIDDEN = ("exec", "import", "open", "os.system", "subprocess.Popen", "os.exec", "os.spawn")


def parse_audited(text):
    EVENTS.clear()
    _recording[0] = True
    try:
        return parse_turn(text)
    finally:
        _recording[0] = False


def test_corpus_has_at_least_two_hundred_cases():
    assert len(CASES) >= 200
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case_id", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_corpus_case(case_id, text, expected, tmp_path):
    start = time.perf_counter()
    try:
        turn = parse_audited(text)
        outcome, result = "ok", [c.render() for c in turn.calls]
    except ParseError as exc:
        outcome, result = "err", str(exc)
    elapsed = time.perf_counter() - start
    kind, want = expected
    assert outcome == kind, (case_id, result)
    if kind == "ok" and want is not None:
        assert result == want
    if kind == "err":
        assert want.lower() in result.lower(), (case_id, result)
        assert "\n" not in result and len(result) < 300  # one line for the model
    for event, args in EVENTS:
        if event == "open" and args[0] == FILENAME:
            continue  # CPython's SyntaxError report looks for the sentinel name; nothing is read
        assert not event.startswith(FORBIDDEN), (case_id, event, args)
        if event == "compile":
            assert args[1] == FILENAME, (case_id, args[1])
    assert sum(e == "compile" for e, _ in EVENTS) <= 1
    assert not Path("/tmp/PWNED").exists()
    assert elapsed < 2, (case_id, elapsed)  # bounded; typical cases take microseconds


def test_parser_module_names_no_eval_exec_or_compile():
    import stratagem.games.bargaining.tools as tools

    tree = ast.parse(Path(tools.__file__).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"eval", "exec", "compile", "__import__", "getattr", "importlib"}


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=400),
        st.builds(lambda body: f"Thought: x\nCode:\n```py\n{body}\n```", st.text(max_size=300)),
        st.builds(
            lambda name, arg: f"Code:\n```py\n{name}({arg})\nwait_for_response()\n```",
            st.sampled_from(["make_offer", "send_message", "respond_to_offer", "eval", "x.y"]),
            st.text(alphabet="0123456789.-+eE'\"()[]{},=_abcxyzTrueFalseNone ", max_size=40),
        ),
    )
)
def test_any_text_gives_calls_or_parse_error_quickly(text):
    start = time.perf_counter()
    try:
        parse_turn(text)
    except ParseError:
        pass
    assert time.perf_counter() - start < 0.05


# Python-ish answers whose numbers have every size (issue 17 item 1): small, float-range,
# 309-2,000 digits (past float range, under the code cap), signs, exponents, other literals
_SIZES = st.one_of(st.integers(0, 2000), st.sampled_from([307, 308, 309, 310, 400, 1000, 1900]))
_DIGITS = st.builds(lambda d, n: d + "0" * n, st.sampled_from("123456789"), _SIZES)
_NUMBER = st.builds(
    lambda sign, body, tail: f"{sign}{body}{tail}",
    st.sampled_from(["", "", "-", "+", "--", "+-"]),
    st.one_of(
        _DIGITS,
        st.integers(0, 10**9).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.sampled_from(["0x64", "1_000", "True", "None", "nan", "inf", "10j", "'7'", "..."]),
    ),
    st.sampled_from(["", "", "", ".5", ".", "e10", "e-400", "e400", "j", "_0"]),
)
_CALL = st.one_of(
    st.builds(
        lambda form, value: form.format(value),
        st.sampled_from(
            ["make_offer(price={})", "make_offer({})", "wait_for_time_period(duration={})"]
        ),
        _NUMBER,
    ),
    st.builds(
        lambda tool, param, value: f"{tool}({param}{value})",
        st.sampled_from(["make_offer", "wait_for_time_period", "respond_to_offer", "send_message"]),
        st.sampled_from(["price=", "duration=", "response=", "content=", "", "side_offer="]),
        _NUMBER,
    ),
)
_PYTHONISH = st.builds(
    lambda calls, end: "Thought: t\nCode:\n```py\n" + "\n".join(calls) + end + "\n```",
    st.lists(_CALL, min_size=1, max_size=3),
    st.sampled_from(["", "\nwait_for_response()", "\nquit_negotiation()"]),
)


@settings(max_examples=400, deadline=None)
@given(_PYTHONISH)
def test_numbers_of_every_size_give_calls_or_parse_error(text):
    start = time.perf_counter()
    try:
        turn = parse_turn(text)
    except ParseError:
        return
    finally:
        assert time.perf_counter() - start < 0.05
    for call in turn.calls:  # whatever parsed is a bounded, finite float
        for key in ("price", "duration"):
            value = call.arg(key)
            assert value is None or (isinstance(value, float) and 0 < value <= 1e7)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["make_offer", "wait_for_time_period", "respond_to_offer", "x"]),
    st.sampled_from(["price", "duration", "response", "content"]),
    st.one_of(_NUMBER, _DIGITS, st.integers(1, 1200).map(lambda n: "[" * n)),
)
def test_json_arguments_of_every_size_give_calls_or_parse_error(name, key, value):
    calls = [{"name": name, "arguments": f'{{"{key}": {value}}}'}]
    try:
        parse_json_calls(calls)
    except ParseError:
        pass
    try:  # arguments already decoded by an endpoint client: a Python int of any size
        parse_json_calls([{"name": name, "arguments": {key: int("9" * 1990)}}])
    except ParseError:
        pass


@pytest.mark.parametrize("digits", [309, 400, 1000, 1975])
def test_huge_integer_prices_and_durations_are_parse_errors(digits):
    big = "9" * digits
    for code in (f"make_offer({big})", f"wait_for_time_period({big})"):
        assert len(code) <= 2000  # under the code cap: the value check must refuse it
        with pytest.raises(ParseError, match="at most"):
            parse_turn(f"Code:\n```py\n{code}\n```")
    for key, tool in (("price", "make_offer"), ("duration", "wait_for_time_period")):
        with pytest.raises(ParseError, match="at most"):
            parse_json_calls([{"name": tool, "arguments": f'{{"{key}": {big}}}'}])
        with pytest.raises(ParseError, match="at most"):
            parse_json_calls([{"name": tool, "arguments": {key: int(big)}}])


def test_deeply_nested_json_arguments_are_a_parse_error():
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_json_calls([{"name": "make_offer", "arguments": "[" * 1500}])


def test_a_turn_may_end_without_a_terminal_call():
    turn = parse_turn("Code:\n```py\nrespond_to_offer(response=False)\nmake_offer(price=9)\n```")
    assert [c.name for c in turn.calls] == ["respond_to_offer", "make_offer"]
    assert not turn.ends_itself
    assert parse_turn("Code:\n```py\nquit_negotiation()\n```").ends_itself


def _json_form(turn):
    return [{"name": c.name, "arguments": json.dumps(dict(c.args))} for c in turn.calls]


VALID = [c for c in CASES if c[2][0] == "ok" and isinstance(c[1], str)]


@pytest.mark.parametrize(("case_id", "text", "expected"), VALID, ids=[c[0] for c in VALID])
def test_json_tool_calls_equal_code_calls(case_id, text, expected):
    turn = parse_turn(text)
    assert parse_json_calls(_json_form(turn)) == turn.calls


@pytest.mark.parametrize(
    ("code", "json_calls"),
    [
        ("make_offer(price=-100)", [{"name": "make_offer", "arguments": '{"price": -100}'}]),
        ("make_offer(price=0)", [{"name": "make_offer", "arguments": '{"price": 0}'}]),
        ("make_offer(price=True)", [{"name": "make_offer", "arguments": '{"price": true}'}]),
        ("make_offer(price='100')", [{"name": "make_offer", "arguments": '{"price": "100"}'}]),
        ("make_offer(price=None)", [{"name": "make_offer", "arguments": '{"price": null}'}]),
        ("make_offer(price=1e12)", [{"name": "make_offer", "arguments": '{"price": 1e12}'}]),
        (
            "respond_to_offer(response=1)",
            [{"name": "respond_to_offer", "arguments": '{"response": 1}'}],
        ),
        (
            "respond_to_offer(response='True')",
            [{"name": "respond_to_offer", "arguments": '{"response": "True"}'}],
        ),
        (
            "wait_for_time_period(duration=1e9)",
            [{"name": "wait_for_time_period", "arguments": '{"duration": 1e9}'}],
        ),
        ("send_message(content=5)", [{"name": "send_message", "arguments": '{"content": 5}'}]),
        (
            "make_offer(price=1, discount=2)",
            [{"name": "make_offer", "arguments": '{"price": 1, "discount": 2}'}],
        ),
        ("make_offer()", [{"name": "make_offer", "arguments": "{}"}]),
    ],
)
def test_json_and_code_forms_give_the_same_error(code, json_calls):
    terminal = "" if code.startswith(("respond", "wait_for_time")) else "\nwait_for_response()"
    extra = [] if terminal == "" else [{"name": "wait_for_response", "arguments": "{}"}]
    with pytest.raises(ParseError) as code_err:
        parse_turn(f"Code:\n```py\n{code}{terminal}\n```")
    with pytest.raises(ParseError) as json_err:
        parse_json_calls(json_calls + extra)
    assert str(code_err.value) == str(json_err.value)


def test_json_specific_failures():
    for bad, msg in [
        ("not a list", "list"),
        ([{"arguments": "{}"}], "name"),
        ([{"name": "make_offer", "arguments": "{bad"}], "not valid JSON"),
        ([{"name": "make_offer", "arguments": "[1]"}], "JSON object"),
        ([{"name": "eval", "arguments": "{}"}], "unknown tool"),
        ([{"name": "wait_for_response", "arguments": "{}"}] * 4, "at most 3"),
    ]:
        with pytest.raises(ParseError, match=msg):
            parse_json_calls(bad)
