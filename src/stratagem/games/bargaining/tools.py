"""Bargaining tool calls: parsed, never executed (SPEC §8; RELIABILITY F).

A model answers with ``Thought:`` then ``Code:`` and exactly one fenced ``py``/``python`` block of
tool calls. The block goes through ``ast.parse`` and a whitelist walk, nothing else: every
statement must be a call of one of the seven tools by its plain ASCII name, with literal
arguments only. Values are checked (finite positive prices under a cap, bools only for
responses, bounded strings); a turn has at most three calls and at most one terminal call
(``quit_negotiation`` or ``wait_for_response``, seed 004 Table 1), which comes last. A turn without
a terminal call is valid: the engine ends it with an implicit ``wait_for_response()``. Anything
else raises ``ParseError`` with a one-line reason that is sent back to the model; no other
exception escapes, whatever the text (a Hypothesis property in the tests).

Policy decisions (each pinned by the hostile corpus in the tests):
- hex (``0x64``) and underscores (``1_000``) are valid Python numerals: accepted;
- several calls on one line with semicolons: accepted;
- implicit string concatenation and triple-quoted strings are literals: accepted;
- ``# type:`` and other comments are ignored;
- fullwidth names (which Python folds to ASCII) and homoglyphs: rejected;
- bidi controls in messages are removed; lone surrogates become U+FFFD;
- fences inside ``<think>`` are ignored; a trailing ``<end_code>`` is tolerated;
- a prompt-injection Thought parses: its defence is the IR-violation metric, not the parser.
Native JSON tool calls from endpoints pass the same validation (``parse_json_calls``).
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from typing import Any

MAX_OUTPUT_CHARS = 8000
MAX_CODE_CHARS = 2000
MAX_CALLS = 3
MAX_MESSAGE_CHARS = 1000
MAX_SIDE_OFFER_CHARS = 300
MAX_PRICE = 1e7
MIN_PRICE = 0.01  # a cent: a smaller price (a denormal) would print as $0.00
MAX_WAIT = 48.0  # time units one wait_for_time_period may skip
FILENAME = "<tool-call>"

# name -> parameters in positional order: (name, kind, required)
SIGNATURES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "make_offer": (("price", "price", True), ("side_offer", "side_offer", False)),
    "respond_to_offer": (("response", "bool", True),),
    "send_message": (("content", "text", True),),
    "search_price": (),
    "quit_negotiation": (),
    "wait_for_response": (),
    "wait_for_time_period": (("duration", "duration", True),),
}
TERMINAL = frozenset({"quit_negotiation", "wait_for_response"})  # seed 004 Table 1
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)


class ParseError(ValueError):
    """A tool-call answer we refuse; ``str(error)`` is the one-line reason for the model."""


@dataclass(frozen=True, slots=True)
class Call:
    """One validated tool call: its name and its arguments in signature order."""

    name: str
    args: tuple[tuple[str, Any], ...] = ()

    def arg(self, key: str, default: Any = None) -> Any:
        """Returns the value of argument ``key``, or ``default`` when it was not given."""
        return dict(self.args).get(key, default)

    def render(self) -> str:
        """Returns the call as Python source (``make_offer(price=120.0)``)."""
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args)
        return f"{self.name}({inner})"


@dataclass(frozen=True, slots=True)
class Turn:
    """One seat's answer: its calls as written (at most three) and its private Thought text."""

    calls: tuple[Call, ...]
    thought: str = ""

    @property
    def ends_itself(self) -> bool:
        """Whether the turn ends with a terminal call (else the engine adds a wait)."""
        return bool(self.calls) and self.calls[-1].name in TERMINAL


def parse_turn(text: object) -> Turn:
    """Returns the calls in a model's answer, or raises ``ParseError``; nothing is executed."""
    if not isinstance(text, str):
        raise ParseError("the answer is not text")
    if len(text) > MAX_OUTPUT_CHARS:
        raise ParseError(f"the answer is longer than {MAX_OUTPUT_CHARS} characters")
    visible = _THINK.sub("", text)
    blocks = _FENCE.findall(visible)
    if not blocks:
        if "```" in visible:
            raise ParseError("the code block is not closed with ```")
        raise ParseError("no code block: write Code: and one ```py block of tool calls")
    if len(blocks) > 1:
        raise ParseError("more than one code block: put all tool calls in one ```py block")
    lang, code = blocks[0]
    if lang.lower() not in ("", "py", "python"):
        raise ParseError(f"the code block must be ```py, not ```{lang}")
    code = code.replace("<end_code>", "")
    thought = visible.split("Code:", 1)[0]
    thought = thought.split("Thought:", 1)[1] if "Thought:" in thought else thought
    return Turn(parse_code(code), thought.strip()[:MAX_OUTPUT_CHARS])


def parse_code(code: str) -> tuple[Call, ...]:
    """Returns the calls of one code block (whitelist walk of its ``ast``), or ``ParseError``."""
    if len(code) > MAX_CODE_CHARS:
        raise ParseError(f"the code block is longer than {MAX_CODE_CHARS} characters")
    if "\x00" in code:
        raise ParseError("the code block contains a NUL byte")
    try:
        tree = ast.parse(code, filename=FILENAME, mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise ParseError(f"the code is not valid tool-call syntax ({_one_line(reason)})") from None
    calls = tuple(_call(stmt, code) for stmt in tree.body)
    return check_turn(calls)


def check_turn(calls: tuple[Call, ...]) -> tuple[Call, ...]:
    """Returns ``calls`` if they can form a turn (1-3 calls, at most one terminal call, last)."""
    if not calls:
        raise ParseError("no tool call: write one to three tool calls in the code block")
    if len(calls) > MAX_CALLS:
        raise ParseError(f"{len(calls)} tool calls: at most {MAX_CALLS} per turn")
    terminal = [c for c in calls if c.name in TERMINAL]
    if len(terminal) > 1:
        raise ParseError(
            f"a turn ends with at most one terminal tool ({', '.join(sorted(TERMINAL))}),"
            f" found {len(terminal)}"
        )
    if terminal and calls[-1].name not in TERMINAL:
        raise ParseError(f"the terminal tool {terminal[0].name} must be the last call")
    return calls


def _call(stmt: ast.stmt, code: str) -> Call:
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        raise ParseError(f"only tool calls are allowed, not {type(stmt).__name__.lower()}")
    node = stmt.value
    if not isinstance(node.func, ast.Name):
        raise ParseError("call tools by their plain name, e.g. make_offer(price=100)")
    name = node.func.id
    if ast.get_source_segment(code, node.func) != name or not name.isascii():
        raise ParseError("tool names must be written in plain ASCII")
    if name not in SIGNATURES:
        raise ParseError(f"unknown tool {_one_line(name)[:40]!r}; tools: {', '.join(SIGNATURES)}")
    values: dict[str, Any] = {}
    params = SIGNATURES[name]
    if len(node.args) > len(params):
        raise ParseError(f"{name} takes at most {len(params)} positional arguments")
    for param, arg in zip(params, node.args, strict=False):
        values[param[0]] = _literal(arg, name, param[0])
    for kw in node.keywords:
        if kw.arg is None:
            raise ParseError(f"{name}: **kwargs are not allowed")
        if kw.arg in values:
            raise ParseError(f"{name}: argument {kw.arg!r} given twice")
        values[kw.arg] = _literal(kw.value, name, kw.arg)
    return validate_call(name, values)


def _literal(node: ast.expr, tool: str, param: str) -> Any:
    if isinstance(node, ast.Starred):
        raise ParseError(f"{tool}: *args are not allowed")
    if isinstance(node, ast.Constant):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
    ):
        value = node.operand.value
        # a signed number only: not ``-True``, not ``-"x"``
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise ParseError(f"{tool}: {param} must be a literal value, not an expression")


def validate_call(name: str, values: dict[str, Any]) -> Call:
    """Returns the call with checked arguments, or ``ParseError`` (code and JSON calls alike)."""
    if name not in SIGNATURES:
        raise ParseError(
            f"unknown tool {_one_line(str(name))[:40]!r}; tools: {', '.join(SIGNATURES)}"
        )
    params = {p: (kind, required) for p, kind, required in SIGNATURES[name]}
    for key in values:
        if key not in params:
            raise ParseError(f"{name}: unknown argument {_one_line(str(key))[:40]!r}")
    args = []
    for param, (kind, required) in params.items():
        if param not in values:
            if required:
                raise ParseError(f"{name}: missing argument {param!r}")
            continue
        args.append((param, _check(kind, values[param], name, param)))
    return Call(name, tuple(args))


def _check(kind: str, value: Any, tool: str, param: str) -> Any:
    """Returns ``value`` checked as ``tool``'s argument ``param`` of ``kind`` and normalised
    (numbers as floats, text cleaned), or raises ``ParseError`` naming them."""
    where = f"{tool}: {param}"
    if kind in ("price", "duration"):
        return _check_number(kind, value, where)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ParseError(f"{where} must be True or False")
        return value
    if kind == "side_offer" and value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(f"{where} must be a string, not {type(value).__name__}")
    limit = MAX_MESSAGE_CHARS if kind == "text" else MAX_SIDE_OFFER_CHARS
    if len(value) > limit:
        raise ParseError(f"{where} is longer than {limit} characters")
    return clean_text(value)


def _check_number(kind: str, value: Any, where: str) -> float:
    """Returns the ``price`` or ``duration`` ``value`` as a float when it is a finite positive
    number within its kind's bounds, else raises ``ParseError`` prefixed by ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where} must be a number, not {type(value).__name__}")
    # ints compare exactly: math.isfinite or float() of a 309+ digit int raises OverflowError
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError(f"{where} must be finite")
    if value <= 0:
        raise ParseError(f"{where} must be positive")
    if kind == "price" and value < MIN_PRICE:
        raise ParseError(f"{where} must be at least {MIN_PRICE:g}")
    cap = MAX_PRICE if kind == "price" else MAX_WAIT
    if value > cap:
        raise ParseError(f"{where} must be at most {cap:g}")
    return float(value)


def clean_text(text: str) -> str:
    """Returns ``text`` with lone surrogates replaced and bidi controls dropped."""
    return _BIDI.sub("", _SURROGATE.sub("\ufffd", text))


def parse_json_calls(tool_calls: Any) -> tuple[Call, ...]:
    """Returns native tool calls (``[{"name": ..., "arguments": "<json>"}]``) checked exactly as
    code is, or raises ``ParseError``."""
    if not isinstance(tool_calls, list):
        raise ParseError("tool calls must be a list")
    if len(tool_calls) > MAX_CALLS:
        raise ParseError(f"{len(tool_calls)} tool calls: at most {MAX_CALLS} per turn")
    calls = []
    for item in tool_calls:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ParseError("each tool call needs a name")
        label = _one_line(item["name"])[:40]
        raw = item.get("arguments", "{}")
        if isinstance(raw, str):
            if len(raw) > MAX_CODE_CHARS:
                raise ParseError(f"tool arguments are longer than {MAX_CODE_CHARS} characters")
            try:
                raw = json.loads(raw)
            except (ValueError, RecursionError):  # RecursionError: ~1,000 nested brackets
                raise ParseError(f"{label}: arguments are not valid JSON") from None
        if not isinstance(raw, dict):
            raise ParseError(f"{label}: arguments must be a JSON object")
        calls.append(validate_call(item["name"], raw))
    return check_turn(tuple(calls))


_JSON_TYPES = {
    "price": {"type": "number"},
    "duration": {"type": "number"},
    "bool": {"type": "boolean"},
    "text": {"type": "string"},
    "side_offer": {"type": ["string", "null"]},
}


def tool_schemas() -> list[dict[str, Any]]:
    """Returns the seven tools as OpenAI function-calling schemas (endpoints with native tools)."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {p: _JSON_TYPES[kind] for p, kind, _ in params},
                    "required": [p for p, _, required in params if required],
                    "additionalProperties": False,
                },
            },
        }
        for name, params in SIGNATURES.items()
    ]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
