"""PSRO: exact on Kuhn's tree, simulated over the IPD strategies (deterministic, so one
episode per cell is exact)."""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.games import get_game, kuhn
from stratagem.solvers.psro import (
    CandidateOracle,
    MetaGame,
    TreeGame,
    mix_policies,
    plot_meta_strategies,
    psro,
    simulate,
)
from stratagem.solvers.tree import expected_returns
from stratagem.strategies import get_strategy
from stratagem.tree import uniform_policy

DETERMINISTIC = (
    "AlwaysCooperate",
    "AlwaysDefect",
    "TitForTat",
    "GrimTrigger",
    "AlternatingDefect",
    "SuspiciousTFT",
    "Pavlov",
    "TitForTwoTats",
)


def ipd_meta_game(asked: list[tuple[str, str]] | None = None) -> MetaGame:
    evaluate = simulate(get_game("ipd"), lambda n: get_strategy("ipd", n), episodes=1, seed=0)

    def recorded(pairs):
        if asked is not None:
            asked.extend(pairs)
        return evaluate(pairs)

    return MetaGame(recorded)


def test_exact_psro_on_kuhn_reaches_the_equilibrium():
    game = TreeGame(kuhn.game_tree())
    result = psro(MetaGame(game.evaluate), game, "zero-sum-nash", initial=("uniform", "uniform"))
    assert result.stopped == "converged"
    assert result.iterations[0].gains == pytest.approx((3 / 8, 13 / 24), abs=1e-12)
    assert sum(result.iterations[0].gains) == pytest.approx(11 / 12)  # uniform's NashConv
    final = result.final
    assert sum(final.gains) == pytest.approx(0.0, abs=1e-9)  # NashConv of the meta-mixture
    assert final.values[0] == pytest.approx(-1 / 18, abs=1e-9)
    assert len(result.iterations) == 7


def test_mixing_policies_is_mixing_before_the_game():
    # Kuhn's theorem: against any player-0 policy, the behaviour mixture of player 1's policies
    # earns what picking one of them at random before the game earns
    root = kuhn.game_tree()
    policies = [random_policy(root, seed) for seed in (0, 1, 2)]
    weights = np.array([0.2, 0.5, 0.3])
    mixed = mix_policies(root, 1, policies, weights)
    assert set(mixed) == {k for k in uniform_policy(root) if k.split(":")[1] in ("P", "B")}
    for seed in (3, 4):
        mine = random_policy(root, seed)
        direct = sum(
            w * returns0(root, mine, pol) for w, pol in zip(weights, policies, strict=True)
        )
        assert returns0(root, mine, mixed) == pytest.approx(direct, abs=1e-13)


def random_policy(root, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    return {
        key: dict(zip(dist, map(float, rng.dirichlet(np.ones(len(dist)))), strict=True))
        for key, dist in uniform_policy(root).items()
    }


def returns0(root, policy0, policy1) -> float:
    """Player 0's expected payoff when player 0 follows ``policy0`` and player 1 ``policy1``."""
    owner1 = {k for k in policy1 if k.split(":")[1] in ("P", "B")}  # Kuhn: player 1 acts 2nd
    merged = {k: (policy1[k] if k in owner1 else policy0[k]) for k in policy0}
    return expected_returns(root, merged)[0]


def test_psro_over_ipd_from_always_cooperate_ends_in_mutual_defection():
    # the finitely repeated dilemma: the only equilibrium outcome is defection every round.
    # LP meta-solvers land on it exactly; the averaging dynamics keep a trace of their start
    for solver in ("cce", "zero-sum-nash", "regret-matching", "replicator"):
        result = psro(
            ipd_meta_game(),
            CandidateOracle(DETERMINISTIC),
            solver,
            initial=("AlwaysCooperate", "AlwaysCooperate"),
        )
        exact = solver in ("cce", "zero-sum-nash")
        assert result.stopped == ("converged" if exact else "closed"), solver
        assert result.final.populations[0] == ("AlwaysCooperate", "AlwaysDefect")
        mass = result.final.meta_strategy[0]["AlwaysDefect"]
        assert mass == pytest.approx(1.0, abs=1e-12 if exact else 0.01), solver
        assert result.final.values == pytest.approx((1.0, 1.0), abs=1e-12 if exact else 0.02)


def test_psro_over_ipd_with_replicator_dynamics(tmp_path):
    # from TitForTwoTats, the exploiters (SuspiciousTFT, AlternatingDefect) enter and are then
    # answered by reciprocators; the populations close after 7 iterations on a meta-strategy
    # of mostly TitForTat, GrimTrigger and TitForTwoTats that earns ~3 per round (mutual
    # cooperation); measured, and deterministic (deterministic strategies, fixed seed)
    asked: list[tuple[str, str]] = []
    result = psro(
        ipd_meta_game(asked),
        CandidateOracle(DETERMINISTIC),
        "replicator",
        initial=("TitForTwoTats", "TitForTwoTats"),
    )
    assert result.stopped == "closed"
    assert [it.responses[0] for it in result.iterations] == [
        "SuspiciousTFT",
        "AlwaysCooperate",
        "SuspiciousTFT",
        "AlternatingDefect",
        "GrimTrigger",
        "TitForTat",
        "TitForTat",
    ]
    final = result.final.meta_strategy[0]
    top = sorted(final, key=final.get, reverse=True)[:3]
    assert top == ["TitForTat", "GrimTrigger", "TitForTwoTats"]
    assert final["TitForTat"] == pytest.approx(0.385, abs=0.01)
    assert result.final.values == pytest.approx((2.989, 2.989), abs=1e-3)
    assert max(result.final.gains) < 0.01
    # incremental: no cell is played twice, and the meta-game holds every population pair
    assert len(asked) == len(set(asked))
    rows, cols = result.populations
    assert {(a, b) for a in rows for b in cols} <= set(asked)
    png = plot_meta_strategies(result, tmp_path / "meta.png")
    assert png.stat().st_size > 10_000


def test_nash_bargaining_can_close_without_equilibrium():
    result = psro(
        ipd_meta_game(),
        CandidateOracle(DETERMINISTIC),
        "nash-bargaining",
        initial=("AlwaysCooperate", "AlwaysCooperate"),
    )
    assert result.stopped == "closed"
    # the bargain keeps mutual cooperation although defecting against it gains 2 per round
    assert result.final.meta_strategy[0] == {"AlwaysCooperate": 1.0, "AlwaysDefect": 0.0}
    assert result.final.gains == pytest.approx((2.0, 2.0))


def test_unknown_meta_solver():
    with pytest.raises(KeyError):
        psro(ipd_meta_game(), CandidateOracle(DETERMINISTIC), "nope", initial=("TitForTat",) * 2)


def test_nash_conv_of_exact_psro_falls():
    game = TreeGame(kuhn.game_tree())
    result = psro(MetaGame(game.evaluate), game, "zero-sum-nash", initial=("uniform", "uniform"))
    conv = [sum(it.gains) for it in result.iterations]
    assert conv[-1] < conv[0] / 100
