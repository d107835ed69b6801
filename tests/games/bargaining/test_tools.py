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
