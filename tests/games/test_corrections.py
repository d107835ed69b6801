"""The shared correction policy: retries per turn, then fallback; abort after a failure run."""

from stratagem.games.corrections import Corrections, Verdict, correction_text


def test_one_retry_then_fallback_per_turn():
    policy = Corrections(retries=1)
    assert policy.refuse(0) == Verdict.RETRY and policy.attempt == 1
    assert policy.refuse(0) == Verdict.FALLBACK and policy.attempt == 0
    assert policy.refuse(1) == Verdict.RETRY  # a new turn starts with a retry again
    policy.accept(1)
    assert policy.total == [2, 1] and policy.consecutive == [2, 0]


def test_abort_after_five_consecutive_failures_of_one_seat():
    policy = Corrections(retries=None, abort_after=5)
    verdicts = [policy.refuse(0) for _ in range(5)]
    assert verdicts == [Verdict.RETRY] * 4 + [Verdict.ABORT]


def test_an_accepted_answer_resets_the_run():
    policy = Corrections(retries=None, abort_after=3)
    policy.refuse(0), policy.refuse(0)
    policy.accept(0)
    assert policy.refuse(0) == Verdict.RETRY and policy.refuse(0) == Verdict.RETRY
    assert policy.refuse(0) == Verdict.ABORT


def test_correction_text_names_the_reason():
    text = correction_text("several prefixes in one turn", 2)
    assert "several prefixes in one turn" in text and "2" in text
