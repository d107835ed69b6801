"""Bargaining GRPO: the reward terms on constructed negotiations (exact values), the IR penalty on
and off, context overflow → reward 0 and loss weight 0 on the tiny LM, the tournament slice, and
one step end to end whose resume equals the uninterrupted run."""

from __future__ import annotations

import json

import pytest
import torch

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.game import Invalid
from stratagem.games.bargaining import Bargaining, Call, Turn
from stratagem.games.bargaining.catalog import Item, Scenario
from stratagem.settings import build, choose, field_docs
from stratagem.strategies.bargaining import offer
from stratagem.training.bargaining import report
from stratagem.training.bargaining import rollouts as br
from stratagem.training.bargaining import trainer as bg
from stratagem.training.bargaining.trainer import BargainingArgs, Reward, reward
from stratagem.training.packing import pack

ITEM = Item("Desk lamp", "home", "A brass desk lamp.", 80.0, 250.0)
WAIT = Call("wait_for_response")


def code(*calls: str) -> str:
    """A model answer holding ``calls`` in one code block."""
    body = "\n".join(calls)
    return f"Thought: my reasons\nCode:\n```py\n{body}\n```"


def negotiate(seat, answers, opponent, *, v_s=100.0, v_b=200.0, max_rounds=10):
    """The trace of one negotiation: ``seat`` answers with ``answers`` (model texts, parsed by
    the game as an LLM agent's are, or ready decisions), the other seat plays ``opponent``."""
    regime = "GFT" if v_b > v_s else "NGFT"
    game = Bargaining(items=[ITEM], max_rounds=max_rounds)
    names = ("policy", "opponent") if seat == 0 else ("opponent", "policy")
    episode = Episode(game, "e", 7, names, scenario=Scenario(0, ITEM, v_s, v_b, regime))
    answers, opponent = list(answers), list(opponent)
    while not episode.done:
        for obs in episode.waiting():
            if obs.seat != seat:
                episode.submit(obs.seat, Decision(opponent.pop(0)))
                continue
            answer = answers.pop(0)
            if isinstance(answer, str):
                action = game.parse(answer)
                status = "failed" if isinstance(action, Invalid) else "ok"
                answer = Decision(action, text=answer, status=status)
            episode.submit(obs.seat, answer)
        episode.step()
    assert not answers and not opponent, "the script was not played out"
    return episode.trace()


def terms(r: Reward) -> tuple:
    return (r.format, r.execution, r.consistency, r.surplus, r.ir, r.overflow)


def test_reward_terms_of_a_buyer_who_corrects_itself_and_closes():
    trace = negotiate(
        1,
        [
            "I would pay 120.",  # no code block: a format failure, corrected
            code("respond_to_offer(response=True)", "make_offer(price=120)"),  # parses, refused
            code(
                "respond_to_offer(response=False)", "make_offer(price=150)", "wait_for_response()"
            ),
            code("respond_to_offer(response=True)"),  # the seller's 180: deal
        ],
        [
            offer(240.0),
            offer(220.0),
            Turn(
                (
                    Call("respond_to_offer", (("response", False),)),
                    Call("make_offer", (("price", 180.0),)),
                    WAIT,
                )
            ),
        ],
    )
    assert trace.rounds[0].info["price"] == 180.0
    r = reward(trace, 1)
    # format 3 of 4 answers parse; execution 2 of those 3 were played (the second was refused);
    # consistent; surplus (200 − 180) / (200 − 100)
    assert terms(r) == (0.75, 2 / 3, 1.0, 0.2, 0.0, False)
    assert r.total == pytest.approx(0.75 + 2 / 3 + 1.0 + 0.2, abs=1e-12)
    assert terms(reward(trace, 1, ir_penalty=True)) == terms(r)  # a valid GFT deal: no IR term


def test_accepting_worse_than_a_refused_offer_halves_consistency():
    trace = negotiate(
        0,
        [
            code("make_offer(price=190)"),
            code("respond_to_offer(response=False)", "make_offer(price=185)"),  # refuses 150
            code("respond_to_offer(response=True)"),  # then takes 130 < 150
        ],
        [
            offer(150.0),
            Turn(
                (
                    Call("respond_to_offer", (("response", False),)),
                    Call("make_offer", (("price", 130.0),)),
                    WAIT,
                )
            ),
        ],
    )
    assert terms(reward(trace, 0)) == (1.0, 1.0, 0.5, 0.3, 0.0, False)
    assert reward(trace, 0).total == pytest.approx(2.8)


def test_offering_worse_than_terms_the_opponent_refused_and_bad_acceptance_give_zero():
    trace = negotiate(
        0,
        [
            code("make_offer(price=190)"),
            code("respond_to_offer(response=False)", "make_offer(price=195)"),  # above refused 190
            code("respond_to_offer(response=True)"),  # 130 after refusing 150
        ],
        [offer(150.0), offer(130.0)],
    )
    assert terms(reward(trace, 0)) == (1.0, 1.0, 0.0, 0.3, 0.0, False)


def test_ir_penalty_off_is_the_paper_and_on_penalises_violations_and_credits_walking_away():
    # NGFT (v_s 150 > v_b 120): the buyer accepts the listing at 200, a violation of 80
    violation = negotiate(
        1, [code("respond_to_offer(response=True)")], [offer(200.0)], v_s=150.0, v_b=120.0
    )
    off, on = reward(violation, 1), reward(violation, 1, ir_penalty=True)
    assert terms(off) == (1.0, 1.0, 1.0, 0.0, 0.0, False) and off.total == 3.0
    assert on.ir == -br.IR_PENALTY == -1.0 and on.total == 2.0
    # GFT, accepted above v_b: the surplus term is 0 (clipped), the penalty the same
    gft = negotiate(1, [code("respond_to_offer(response=True)")], [offer(240.0)])
    assert terms(reward(gft, 1)) == (1.0, 1.0, 1.0, 0.0, 0.0, False)
    assert reward(gft, 1, ir_penalty=True).total == 2.0
    # the opponent's violation is not the trained seat's: a seller paid above v_b keeps 1.0
    windfall = negotiate(
        0,
        [code("make_offer(price=240)")],
        [Turn((Call("respond_to_offer", (("response", True),)),))],
    )
    assert reward(windfall, 0, ir_penalty=True).surplus == 1.0
    assert reward(windfall, 0, ir_penalty=True).ir == 0.0
    # NGFT walk-away: a quit, or the round limit, earns the credit only with ir_penalty
    quit = negotiate(
        0,
        [code("make_offer(price=190)"), code("quit_negotiation()")],
        [offer(100.0)],
        v_s=150.0,
        v_b=120.0,
    )
    limit = negotiate(
        0, [code("make_offer(price=190)")], [offer(100.0)], v_s=150.0, v_b=120.0, max_rounds=2
    )
    for trace in (quit, limit):
        assert reward(trace, 0).total == 3.0
        assert reward(trace, 0, ir_penalty=True).ir == br.WALK_AWAY_CREDIT == 1.0
        assert reward(trace, 0, ir_penalty=True).total == 4.0
    # a GFT walk-away earns nothing either way
    gft_quit = negotiate(
        0, [code("make_offer(price=190)"), code("quit_negotiation()")], [offer(100.0)]
    )
    assert reward(gft_quit, 0, ir_penalty=True).total == 3.0


def test_an_overflow_zeroes_the_reward_even_where_walking_away_would_earn_credit():
    overflow = Decision(br.QUIT, status="fallback", info={"overflow": True, "prompt_tokens": 9})
    trace = negotiate(
        0, [code("make_offer(price=190)"), overflow], [offer(100.0)], v_s=150.0, v_b=120.0
    )
    assert trace.rounds[0].info["end_reason"] == "quit"
    r = reward(trace, 0, ir_penalty=True)
    # the terms leave the harness's answer out; the total is 0 whatever they are
    assert terms(r) == (1.0, 1.0, 1.0, 0.0, 1.0, True) and r.total == 0.0


def sampled(answer: str, prompt: list[int], n: int, logprob: float) -> Decision:
    """A model answer carrying the rollout facts of a sampled decision."""
    action = Bargaining().parse(answer)
    info = {
        "prompt_ids": prompt,
        "token_ids": list(range(10, 10 + n)),
        "token_logprobs": [logprob] * n,
    }
    return Decision(action, text=answer, status="ok", info=info)


def test_advantages_and_loss_weights_with_an_overflowed_rollout():
    overflow = Decision(br.QUIT, status="fallback", info={"overflow": True})
    # the second prompt continues the first prompt and answer, as a rollout's chat does
    kept = negotiate(
        0,
        [
            sampled(code("make_offer(price=190)"), [1, 2, 3], 4, -1.0),
            sampled(code("respond_to_offer(response=True)"), [1, 2, 3, 10, 11, 12, 13, 5], 2, -0.5),
        ],
        [offer(150.0)],
    )
    cut = negotiate(
        0, [sampled(code("make_offer(price=190)"), [1, 2, 3], 3, -2.0), overflow], [offer(150.0)]
    )
    group = bg.Group(0, 0, [kept, cut], [reward(kept, 0), reward(cut, 0)])
    assert group.totals.tolist() == [3.5, 0.0]  # 1 + 1 + 1 + (150 − 100) / 100; overflow: 0
    args = BargainingArgs()
    samples = bg.samples_from([group], args)
    # Eq. 7: (R − mean) / (std + 1e-8) over the group, the population std 1.75
    assert [s.advantage for s in samples] == pytest.approx([1.0, 1.0, -1.0], abs=1e-7)
    # a rollout weighs 1 / (1 group × 2 rollouts), split over its 2 answers; overflow: 0
    assert [s.weight for s in samples] == [0.25, 0.25, 0.0]
    assert [len(s.token_ids) for s in samples] == [4, 2, 3]
    assert samples[0].old_logprobs == [-1.0] * 4
    (sequence,) = pack([s for s in samples if s.weight > 0])  # the overflowed one is out
    assert sequence.ids == [1, 2, 3, 10, 11, 12, 13, 5, 10, 11]
    assert sequence.positions == [3, 4, 5, 6, 8, 9]
    assert sequence.weights == [0.0625] * 4 + [0.125] * 2


def test_stage_table_and_options():
    row = {
        "score": {"value": 0.25, "stderr": 0.05, "n": 8},
        "seller/deal_rate": {"value": 0.5, "stderr": 0.125, "n": 4},
        "seller/surplus_share": {"value": 0.0, "stderr": 0.0, "n": 0},
    }
    table = report.stage_table([("SFT", row)])
    assert table.splitlines()[2] == ("| SFT | seller | 50.0 ± 12.5 | – | – | – | 25.0 ± 5.0 |")
    for bad, message in (
        (dict(rollouts=1), "--rollouts must be at least 2 (GRPO compares rollouts)"),
        (dict(max_context=256), "--max-context (256) must exceed --max-new-tokens"),
        (dict(eval_gft=0), "--eval-gft must be at least 1"),
        (dict(temperature=0.0), "--temperature must be above 0"),
    ):
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            BargainingArgs(**bad).check()
    from stratagem.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="Boulware"):
        BargainingArgs(opponent="Bulware").check()
    assert "steps" not in BargainingArgs().fingerprint()


def test_tournament_slice_matches_the_tournament_metrics():
    """A rule-based stand-in for the policy: the slice's numbers are the summary's."""
    import pandas as pd

    from stratagem.games import get_game
    from stratagem.metrics.bargaining import negotiation_rows, summarise
    from stratagem.play import play
    from stratagem.strategies import get_strategy

    game = get_game("bargaining", split="validation")
    agent = get_strategy("bargaining", "Conceder")
    row = report.tournament_slice(game, agent, ["Boulware", "Linear"], 6, 3, seed=5)
    specs = report.evaluation_specs(
        agent, ["Boulware", "Linear"], game.tournament_scenarios(6, 3, 5), 5
    )
    assert len(specs) == 2 * 9 * 2
    rows = pd.DataFrame(negotiation_rows(play(game, specs)))
    summary = summarise(rows[rows.agent == "Conceder"], by=("role", "regime"))

    def value(role, regime, metric):
        pick = summary[(summary.role == role) & (summary.regime == regime)]
        return float(pick[pick.metric == metric].value.iloc[0])

    for role in ("seller", "buyer"):
        assert row[f"{role}/deal_rate"]["value"] == pytest.approx(value(role, "GFT", "deal"))
        assert row[f"{role}/deal_rate"]["n"] == 12
        assert row[f"{role}/surplus_share"]["value"] == pytest.approx(
            value(role, "GFT", "surplus_share")
        )
        assert row[f"{role}/ngft_violation"]["value"] == value(role, "NGFT", "violation") == 0.0
    gft = rows[(rows.agent == "Conceder") & (rows.regime == "GFT")]
    assert row["score"]["value"] == pytest.approx(gft.surplus_share.fillna(0.0).mean())
    assert 0 < row["score"]["value"] < 1


# ---- on the tiny LM ----


@pytest.fixture
def bargaining_args(tiny_model):
    def make(out, **overrides) -> BargainingArgs:
        settings = dict(
            model=tiny_model,
            out=out,
            steps=2,
            scenarios=1,
            rollouts=2,
            max_new_tokens=4,
            max_rounds=2,
            checkpoint_every=1,
            eval_gft=0,
            eval_ngft=0,
            lora_rank=4,
            lora_alpha=8,
            learning_rate=1e-3,
        )
        return BargainingArgs(**{**settings, **overrides})

    return make


def rollouts(args, step=0):
    """One step's traces and the policy, on the tiny LM."""
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend
    from stratagem.games import get_game
    from stratagem.play import play
    from stratagem.strategies import get_strategy
    from stratagem.training.policy import load_policy

    game = get_game("bargaining", split="train", max_rounds=args.max_rounds)
    policy, tokenizer = load_policy(args)
    policy.eval()
    backend = HFBackend.from_model(policy, tokenizer, "tiny", prefix_reuse=True)
    llm = LLMAgent(backend, game, Sampling(args.temperature, 1.0, args.max_new_tokens), name="p")
    agent = br.ContextLimit(llm, tokenizer, bg.context_of(policy, args), args.max_new_tokens)
    specs = bg.rollout_specs(agent, get_strategy("bargaining", "Boulware"), args, step)
    return list(play(br.RoleRollouts(game), specs)), policy, agent


@pytest.mark.slow
def test_context_overflow_ends_the_episode_with_zero_reward_and_zero_weight(
    bargaining_args, tmp_path
):
    args = bargaining_args(tmp_path, ir_penalty=True)
    traces, _, _ = rollouts(args)
    groups = bg.step_groups(traces, args)
    assert not any(r.overflow for g in groups for r in g.rewards)
    assert all(s.weight == 0.125 for s in bg.samples_from(groups, args))  # 1 / (2 · 2 · 2)
    buyer = next(t for t in traces if t.meta["seat"] == 1)
    first = next(d for d in buyer.decisions if d.seat == 1)
    assert [d.status for d in buyer.decisions if d.seat == 1] == ["failed", "failed"]
    # the buyer's first prompt fits; its correction prompt (after a garbage answer) does not
    limit = first.info["prompt_tokens"] + args.max_new_tokens + 2
    args = bargaining_args(tmp_path, ir_penalty=True, max_context=limit)
    traces, _, _ = rollouts(args)
    groups = bg.step_groups(traces, args)
    assert [(g.seat, len(g.traces)) for g in groups] == [(0, 2), (1, 2)]
    for t in groups[1].traces:
        mine = [d for d in t.decisions if d.seat == 1]
        assert [d.status for d in mine] == ["failed", "fallback"]
        assert "token_ids" in mine[0].info and mine[1].info["overflow"] is True
        assert mine[1].info["prompt_tokens"] + args.max_new_tokens > limit
        assert t.rounds[0].info["end_reason"] == "quit"  # the overflow ended the episode
    samples = bg.samples_from(groups, args)
    for g in groups:
        for t, r in zip(g.traces, g.rewards, strict=True):
            assert r.overflow == br.overflowed(t, g.seat)
            if r.overflow:  # whatever the walk-away credit would have been
                assert r.total == 0.0
                assert {s.weight for s in samples if s.episode == t.episode_id} == {0.0}
    assert all(r.overflow for r in groups[1].rewards)


@pytest.mark.slow
def test_one_step_end_to_end_and_resume_equals_uninterrupted(
    bargaining_args, tmp_path, monkeypatch
):
    from safetensors.torch import load_file

    # the random tiny LM writes no tool call, so every rollout's real reward is the same (1.0:
    # consistency only) and no advantage moves the weights; score the text instead
    real = bg.reward(rollouts(bargaining_args(tmp_path / "probe"))[0][0], 0)
    assert terms(real) == (0.0, 0.0, 1.0, 0.0, 0.0, False)

    def by_text(trace, seat, *, ir_penalty=False):
        text = "".join(d.text or "" for d in trace.decisions if d.seat == seat)
        return Reward(sum(map(ord, text)) % 97 / 97, 0.0, 1.0, 0.0)  # any function of the text

    monkeypatch.setattr(bg, "reward", by_text)
    bg.train_bargaining(bargaining_args(tmp_path / "full"), log=lambda _: None)
    for steps in (1, 2):  # "killed" after step 1, then resumed
        bg.train_bargaining(bargaining_args(tmp_path / "resumed", steps=steps), log=lambda _: None)

    def adapter(run):
        return load_file(tmp_path / run / "checkpoint-2/adapter/adapter_model.safetensors")

    full, resumed = adapter("full"), adapter("resumed")
    assert any(v.abs().sum() > 0 for k, v in full.items() if "lora_B" in k), "training moved"
    assert full.keys() == resumed.keys()
    for key in full:
        assert torch.equal(full[key], resumed[key]), key
    logs = [
        json.loads((tmp_path / run / "checkpoint-2/trainer_state.json").read_text())["log"]
        for run in ("full", "resumed")
    ]
    assert logs[0][0]["samples"] > 0 and logs[0][0]["grad_norm"] > 0
    for key in ("reward", "format", "loss", "grad_norm"):
        assert [e[key] for e in logs[0]] == [e[key] for e in logs[1]], key


@pytest.mark.slow
def test_checkpoints_are_scored_best_kept_and_stages_written(
    bargaining_args, tmp_path, monkeypatch
):
    scores = {0: 0.2, 1: 0.6, 2: 0.4}

    def scripted(policy, tokenizer, args, step):
        est = {"value": scores[step], "stderr": 0.0, "n": 4}
        return {
            "step": step,
            "score": est,
            "seller/deal_rate": est,
            "buyer/deal_rate": est,
            "seller/ngft_violation": est,
        }

    monkeypatch.setattr(bg, "evaluate_checkpoint", scripted)
    out = tmp_path / "run"
    bg.train_bargaining(bargaining_args(out, eval_gft=1, save_total_limit=1), log=lambda _: None)
    assert sorted(d.name for d in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert json.loads((out / "best.json").read_text())["step"] == 1
    labels = [line.split(" | ")[0] for line in (out / "stages.md").read_text().splitlines()[2:]]
    assert labels == ["| Base"] * 2 + ["| RL (best, step 1)"] * 2 + ["| RL (last, step 2)"] * 2
    assert (out / "curve.png").exists()


@pytest.mark.slow
def test_starting_from_an_adapter_evaluates_base_and_sft_on_the_tiny_lm(
    bargaining_args, tiny_model, tmp_path
):
    """A real tournament slice of the greedy tiny LM (no deal: it writes no tool call) for the
    base model and the SFT policy; stages.md holds both before any RL step."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    sft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    sft.save_pretrained(tmp_path / "sft")
    out = tmp_path / "run"
    args = bargaining_args(out, adapter=str(tmp_path / "sft"), steps=0, eval_gft=1, eval_ngft=1)
    bg.train_bargaining(args, log=lambda _: None)
    base = json.loads((out / bg.BASE_EVAL).read_text())
    assert base["seller/deal_rate"] == {"value": 0.0, "stderr": 0.0, "n": 1}
    assert base["buyer/ngft_violation"]["n"] == 1 and base["score"]["value"] == 0.0
    stages = (out / "stages.md").read_text().splitlines()
    assert [line.split(" | ")[:2] for line in stages[2:]] == [
        ["| Base", "seller"],
        ["| Base", "buyer"],
        ["| SFT", "seller"],
        ["| SFT", "buyer"],
    ]
    assert stages[2].endswith("| 0.0 ± 0.0 | – | 0.0 ± 0.0 | 0.0 ± 0.0 | 0.0 ± 0.0 |")


def test_the_command_takes_every_field_as_an_option_and_refuses_bad_values_in_one_line(tmp_path):
    import dataclasses
    import subprocess
    import sys

    docs = field_docs(BargainingArgs)
    names = [f.name for f in dataclasses.fields(BargainingArgs)]
    assert set(docs) == set(names) and all(docs.values())
    chosen = choose(BargainingArgs, {"eval_opponents": "Boulware,Linear"}, None)
    assert build(BargainingArgs, {k: v[0] for k, v in chosen.items()}).eval_opponents == [
        "Boulware",
        "Linear",
    ]
    cmd = [sys.executable, "-m", "stratagem.cli.main", "train", "bargaining"]
    for flags, message in (
        (["--rollouts", "1"], "--rollouts must be at least 2 (GRPO compares rollouts), got 1"),
        (["--opponent", "Bulware"], "did you mean 'Boulware'?"),
        (["--scale", "grup"], "did you mean 'group'?"),
    ):
        r = subprocess.run(
            [*cmd, *flags, "--out", str(tmp_path / "run")], capture_output=True, text=True
        )
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "run").exists()


def test_the_step_log_leaves_overflowed_rollouts_out_of_the_reward_means():
    overflow = Decision(br.QUIT, status="fallback", info={"overflow": True})
    kept = negotiate(
        0,
        [
            sampled(code("make_offer(price=190)"), [1, 2, 3], 4, -1.0),
            sampled(code("respond_to_offer(response=True)"), [1, 2, 3, 10, 5], 2, -0.5),
        ],
        [offer(150.0)],
    )
    cut = negotiate(
        0, [sampled(code("make_offer(price=190)"), [1, 2, 3], 3, -2.0), overflow], [offer(150.0)]
    )
    group = bg.Group(0, 0, [kept, cut], [reward(kept, 0), reward(cut, 0)])
    summary = bg.step_summary([group])
    assert summary["reward"] == pytest.approx(3.5)  # the kept rollout's, not (3.5 + 0) / 2
    assert summary["format"] == 1.0 and summary["deal_rate"] == 1.0
    assert summary["overflowed"] == 1.0 and summary["overflow_rate"] == 0.5


def test_the_score_label_says_what_it_computes():
    head = report.stage_table([("SFT", {"score": {"value": 0.25, "stderr": 0.05, "n": 8}})])
    assert "valid-deal rate" in head.splitlines()[0]
    assert "*valid*-deal rate" in (bg.__doc__ or "")


def test_train_bargaining_takes_catalog_files(tmp_path):
    import json

    good = tmp_path / "listings.json"
    good.write_text(
        json.dumps(
            [{"title": f"Chair {i}", "category": "furniture", "price": 40 + i} for i in range(30)]
        )
    )
    args = BargainingArgs(catalog=[good])
    args.check()
    assert all(i.title.startswith("Chair") for i in bg.training_game(args).items)
    assert all(i.title.startswith("Chair") for i in bg.evaluation_game(args).items)
    assert "catalog" in BargainingArgs().fingerprint()
    bad = tmp_path / "bad.json"
    bad.write_text('[{"title": "Lamp", "price": NaN}]')
    with pytest.raises(ConfigError, match=r"bad.json: listing 0 \('Lamp'\)"):
        BargainingArgs(catalog=[bad]).check()
