import pytest

from stratagem.parsing import parse_action

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
        ("DEFECT" + "\n" * 1_000_000, IPD, "DEFECT"),
        ("y" * 1_000_000, IPD, None),
        ("Defect.", IPD, "DEFECT"),
        ("dEfEcT", IPD, "DEFECT"),
        ("'COOPERATE'", IPD, "COOPERATE"),
        ('"DEFECT"', IPD, "DEFECT"),
        ("`DEFECT`", IPD, "DEFECT"),
        ("Final answer: COOPERATE!", IPD, "COOPERATE"),
        ("> DEFECT", IPD, "DEFECT"),
        ("- DEFECT", IPD, "DEFECT"),
        ("DEFECT DEFECT", IPD, "DEFECT"),  # the same action twice is not ambiguous
        ("COOPERATE, then DEFECT", IPD, None),
        ("NON-COOPERATE", IPD, None),
        ("COOPERATED", IPD, None),
        ("\t  DEFECT  \t", IPD, "DEFECT"),
        ("DEFECT\r\n", IPD, "DEFECT"),
        ("<THINK>DEFECT</THINK>COOPERATE", IPD, "COOPERATE"),
        ("<think>a</think><think>b</think>\nDEFECT", IPD, "DEFECT"),
        ("<think>\nCOOPERATE\n</think>\n\n", IPD, None),
        ("DEFECT <think>", IPD, "DEFECT"),
        ("<think></think>", IPD, None),
        ("I pick 😀 DEFECT 😀", IPD, "DEFECT"),
        ("DEFECT\u200b", IPD, "DEFECT"),
        ("PASS", ("PASS", "BET"), "PASS"),
        ("bet", ("PASS", "BET"), "BET"),
        ("I will CALL", ("FOLD", "CALL"), "CALL"),
        ("BET", ("FOLD", "CALL"), None),  # not legal here
        ("fold or call? call", ("FOLD", "CALL"), None),
        ("I'd rather not bet; PASS", ("PASS", "BET"), None),
        ("HIGH", ("LOW", "MEDIUM", "HIGH"), "HIGH"),
        ("medium bid", ("LOW", "MEDIUM", "HIGH"), "MEDIUM"),
        ("HIGHER", ("LOW", "MEDIUM", "HIGH"), None),
        ("9", NEG, "9"),
        ("-5", NEG, None),
        ("Demand: 6.", NEG, "6"),
        ("I want 6 points", NEG, "6"),
        ("0", NEG, None),
        ("66", NEG, None),
        ("six", NEG, None),
        ("[ 2 , 1 , 0 ]", VEC, "[2, 1, 0]"),
        ("[2,1,0].", VEC, "[2, 1, 0]"),
        ("**[0, 0, 0]**", VEC, "[0, 0, 0]"),
        ("[1, 0]", VEC, None),
        ("[1, 0, 2, 3]", VEC, None),
        ("(1, 0, 2)", VEC, None),
        ("[1, 0, 2] [1, 0, 2]", VEC, "[1, 0, 2]"),
        ("[-1, 0, 2]", VEC, None),
        ("[01, 0, 2]", VEC, "[1, 0, 2]"),
    ],
)
def test_parse_table(text, legal, token):
    assert parse_action(text, legal).token == token


def test_reasons():
    assert parse_action("COOPERATE / DEFECT", IPD).reason == "ambiguous: COOPERATE, DEFECT"
    assert parse_action("   \n ", IPD).reason == "empty"
    assert parse_action("hmm", IPD).reason == "no action"


def test_table_has_at_least_sixty_cases():
    assert len(test_parse_table.pytestmark[0].args[1]) >= 60


@pytest.mark.parametrize(
    "junk",
    [
        b"\xff\xfe".decode("latin-1"),
        "\x00" * 10,
        "\ud800DEFECT",
        123,
        b"DEFECT",
        ["DEFECT"],
        object(),
    ],
)
def test_never_raises(junk):
    assert parse_action(junk, IPD).token in (None, "DEFECT")
