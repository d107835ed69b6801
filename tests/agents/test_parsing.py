import pytest

from stratagem.agents.parsing import parse_action

IPD = ("COOPERATE", "DEFECT")
NEG = tuple(str(d) for d in range(1, 10))
VEC = ("[0, 0, 0]", "[1, 0, 2]", "[2, 1, 0]")


@pytest.mark.parametrize(
    ("text", "legal", "token"),
    [
        ("DEFECT", IPD, "DEFECT"),
        ("defect", IPD, "DEFECT"),
        ("I think...\n\nCOOPERATE.", IPD, "COOPERATE"),
        ("**Defect**", IPD, "DEFECT"),
        ("Action: DEFECT\n\n", IPD, "DEFECT"),
        ("COOPERATE or DEFECT", IPD, None),  # ambiguous
        ("DEFECT\nI will cooperate", IPD, "COOPERATE"),  # the last line decides
        ("DEFECT\nthat is all", IPD, None),  # last line has no action token
        ("<think>DEFECT</think>\nCOOPERATE", IPD, "COOPERATE"),
        ("COOPERATE\n<think>maybe DEFECT", IPD, "COOPERATE"),  # unclosed think never parsed
        ("<think>DEFECT", IPD, None),
        ("", IPD, None),
        (None, IPD, None),
        ("DEFECTING", IPD, None),
        ("I demand 7", NEG, "7"),
        ("7/10", NEG, "7"),
        ("10", NEG, None),
        ("5.5", NEG, None),
        ("demand 5, final 5", NEG, "5"),
        ("4 or 6", NEG, None),
        ("[1, 0, 2]", VEC, "[1, 0, 2]"),
        ("my demand: [1,0,2]", VEC, "[1, 0, 2]"),
        ("[1, 0, 2] then [2, 1, 0]", VEC, None),
        ("[9, 9, 9]", VEC, None),
        ("x" * 1_000_000 + "\nDEFECT", IPD, "DEFECT"),
    ],
)
def test_parse_table(text, legal, token):
    assert parse_action(text, legal).token == token


def test_reasons():
    assert parse_action("COOPERATE / DEFECT", IPD).reason == "ambiguous: COOPERATE, DEFECT"
    assert parse_action("   \n ", IPD).reason == "empty"
    assert parse_action("hmm", IPD).reason == "no action"
