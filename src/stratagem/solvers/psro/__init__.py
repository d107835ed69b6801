"""Policy-Space Response Oracles (PSRO; Lanctot et al. 2017), generic over games (SPEC §9).

Each seat has a population of strategies. One iteration:

1. the meta-game: the payoffs of every seat-0 strategy against every seat-1 strategy. Only the
   cells of newly added strategies are evaluated (by simulation through ``stratagem.play`` for
   text games, exactly on the tree for solver games);
2. a meta-solver (``solvers.matrix``: replicator dynamics, CCE, Nash bargaining, ...) turns the
   meta-game into a meta-strategy, a joint distribution over the two populations;
3. an oracle best-responds, for each seat, to the opponent's marginal meta-strategy: exactly on a
   solver game's tree (``TreeGame``), or by choosing the best of a list of candidate strategies
   (``CandidateOracle``: rule-based strategies, or instructions for an LLM);
4. each response joins its seat's population.

The gain of a seat is its response's payoff against the opponent's marginal minus its payoff
under the meta-strategy: for a CCE meta-strategy, exactly the incentive to deviate; for a Nash
meta-strategy of a solver game, the sum of the two gains is the NashConv of the mixture. The loop
stops when no gain exceeds the tolerance (``converged``), when every response is already in its
population (``closed``: Lanctot et al.'s stopping rule; the gains left are then those of the
meta-solver itself, e.g. a time-averaged replicator's transient, or Nash bargaining, which is not
an equilibrium), or after the iteration budget (``iterations``). The meta-strategy of every
iteration is logged and ``plot_meta_strategies`` draws it (seed 003, Fig. 3).

Departures from Lanctot et al.: the oracle responds to the marginal of a joint meta-strategy
(as JPSRO does for CCEs, Marris et al. 2021), and each seat keeps its own population, so
asymmetric games (buyer and seller) need nothing special.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from stratagem.solvers.best_response import best_response_policy, best_response_value
from stratagem.solvers.matrix import CONCEPTS, MetaSolver, Profile, cce_gap, nash_gap
from stratagem.solvers.matrix import meta_solver as solver_named
from stratagem.solvers.tree import expected_returns
from stratagem.tree import TERMINAL, Node, Policy, infosets, uniform_policy, walk

if TYPE_CHECKING:
    from stratagem.agent import Agent
    from stratagem.game import Game

Pair = tuple[str, str]  # (seat-0 strategy, seat-1 strategy)
Evaluate = Callable[[Sequence[Pair]], dict[Pair, tuple[float, float]]]


class MetaGame:
    """The empirical game between two populations, grown one strategy at a time.

    Payoffs are cached by (seat-0 strategy, seat-1 strategy), so a cell is evaluated once, and
    the cells missing at any moment are evaluated in one batch (one ``play`` call).
    """

    def __init__(self, evaluate: Evaluate) -> None:
        """``evaluate`` maps strategy pairs to both seats' mean payoffs."""
        self.evaluate = evaluate
        self.populations: tuple[list[str], list[str]] = ([], [])
        self.payoffs: dict[Pair, tuple[float, float]] = {}

    def add(self, seat: int, name: str) -> bool:
        """Adds ``name`` to ``seat``'s population; returns False when it was already there."""
        if name in self.populations[seat]:
            return False
        self.populations[seat].append(name)
        return True

    def ensure(self, pairs: Sequence[Pair]) -> None:
        """Evaluates, in one batch, every pair of ``pairs`` not evaluated yet."""
        missing = list(dict.fromkeys(p for p in pairs if p not in self.payoffs))
        if missing:
            self.payoffs.update(self.evaluate(missing))

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """Returns the (seat-0 payoffs, seat-1 payoffs) matrices, seat 0's population down."""
        rows, cols = self.populations
        self.ensure([(a, b) for a in rows for b in cols])
        row = np.array([[self.payoffs[a, b][0] for b in cols] for a in rows])
        col = np.array([[self.payoffs[a, b][1] for b in cols] for a in rows])
        return row, col

    def payoff(self, seat: int, mine: str, theirs: str) -> float:
        """Returns ``seat``'s payoff when it plays ``mine`` against ``theirs`` (evaluated)."""
        pair = (mine, theirs) if seat == 0 else (theirs, mine)
        return self.payoffs[pair][seat]


class Oracle(Protocol):
    """A best-response oracle for PSRO."""

    def respond(self, game: MetaGame, seat: int, opponent: np.ndarray) -> tuple[str, float]:
        """Returns (a strategy for ``seat``, its expected payoff against the opponent population
        mixed by ``opponent``), the strategy being the best the oracle can find."""
        ...


@dataclass(frozen=True)
class CandidateOracle:
    """Best response by evaluation: the candidate with the highest expected payoff against the
    opponent's meta-strategy (the first such on ties). Candidates' cells are evaluated in one
    batch and cached in the meta-game."""

    candidates: tuple[str, ...]

    def respond(self, game: MetaGame, seat: int, opponent: np.ndarray) -> tuple[str, float]:
        """Returns the best candidate for ``seat`` and its expected payoff against the opponent
        population mixed by ``opponent``."""
        others = game.populations[1 - seat]
        pairs = [
            (c, o) if seat == 0 else (o, c)
            for c in self.candidates
            for o, w in zip(others, opponent, strict=True)
            if w > 0
        ]
        game.ensure(pairs)
        scores = [
            sum(w * game.payoff(seat, c, o) for o, w in zip(others, opponent, strict=True) if w > 0)
            for c in self.candidates
        ]
        best = int(np.argmax(scores))
        return self.candidates[best], float(scores[best])


class TreeGame:
    """A solver game's tree as a PSRO game: strategies are tabular policies, the meta-game is
    exact (expected returns), and the oracle is the exact best response (``respond``)."""

    def __init__(self, root: Node) -> None:
        """Starts with one strategy, ``"uniform"``, the uniform policy."""
        self.root = root
        self.policies: dict[str, Policy] = {"uniform": uniform_policy(root)}
        self._owners = {key: owner for key, (owner, _) in infosets(root).items()}
        self._count = [0, 0]

    def evaluate(self, pairs: Sequence[Pair]) -> dict[Pair, tuple[float, float]]:
        """Returns both players' expected payoffs for each (player-0, player-1) policy pair."""
        return {(a, b): expected_returns(self.root, self._joint(a, b)) for a, b in pairs}

    def _joint(self, first: str, second: str) -> dict[str, Mapping[str, float]]:
        """Player 0 follows policy ``first``, player 1 policy ``second``."""
        mine = (self.policies[first], self.policies[second])
        return {key: mine[owner][key] for key, owner in self._owners.items()}

    def respond(self, game: MetaGame, seat: int, opponent: np.ndarray) -> tuple[str, float]:
        """Returns a new policy ``BR<seat>.<k>``, an exact best response to the opponent's
        meta-strategy (as a behaviour policy), and its value."""
        mixture = mix_policies(
            self.root,
            1 - seat,
            [self.policies[n] for n in game.populations[1 - seat]],
            opponent,
        )
        self._count[seat] += 1
        name = f"BR{seat}.{self._count[seat]}"
        self.policies[name] = best_response_policy(self.root, seat, mixture)
        return name, best_response_value(self.root, seat, mixture)


def mix_policies(
    root: Node, player: int, policies: Sequence[Policy], weights: np.ndarray
) -> dict[str, dict[str, float]]:
    """Returns the behaviour policy of ``player`` equivalent to picking one of ``policies`` with
    ``weights`` before the game (Kuhn's theorem): at each information set I,
    σ(I, a) = Σₖ wₖ πₖ(I) σₖ(I, a) / Σₖ wₖ πₖ(I), with πₖ(I) the player's own reach of I under
    policy k; uniform where no policy reaches I. Other players' infosets are left out."""
    weights = np.asarray(weights, dtype=float)
    totals: dict[str, np.ndarray] = {}
    masses: dict[str, np.ndarray] = {}

    def visit(node: Node, reach: np.ndarray) -> None:  # reach: (K,) own reach per policy
        if node.player == TERMINAL:
            return
        actions = node.actions()
        if node.player != player:
            for a in actions:
                visit(node.child(a), reach)
            return
        key = node.infoset()
        sigma = np.array([[p[key].get(a, 0.0) for a in actions] for p in policies])  # (K, A)
        if key not in totals:  # perfect recall: every node of I has the same own reach
            masses[key] = weights * reach
            totals[key] = masses[key] @ sigma
        for i, a in enumerate(actions):
            visit(node.child(a), reach * sigma[:, i])

    visit(root, np.ones(len(policies)))
    out = {}
    for node in walk(root):
        if node.player == player and node.infoset() not in out:
            key, actions = node.infoset(), node.actions()
            mass = masses[key].sum()
            out[key] = {
                a: float(totals[key][i] / mass) if mass > 0 else 1 / len(actions)
                for i, a in enumerate(actions)
            }
    return out


def simulate(
    game: Game,
    make_agent: Callable[[str], Agent],
    *,
    episodes: int,
    seed: int,
    max_live: int = 256,
) -> Evaluate:
    """Returns an ``Evaluate`` that plays ``episodes`` episodes per pair through
    ``stratagem.play`` and averages each seat's payoff per round. The i-th episode of every pair
    has the same seed (common random numbers), so differences between cells are not noise
    from the deal."""
    from stratagem.play import EpisodeSpec, play
    from stratagem.seeding import derive

    def evaluate(pairs: Sequence[Pair]) -> dict[Pair, tuple[float, float]]:
        specs = []
        for first, second in pairs:
            agents = (make_agent(first), make_agent(second))  # one object per seat: two batches
            specs += [
                EpisodeSpec(
                    f"{first}|{second}|{i:05d}",
                    derive(seed, "psro", i),
                    agents,
                    {"pair": (first, second)},
                )
                for i in range(episodes)
            ]
        sums: dict[Pair, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for trace in play(game, specs, max_live=max_live):
            acc = sums[tuple(trace.meta["pair"])]
            rounds = max(len(trace.rounds), 1)
            acc[0] += sum(r.payoffs[0] for r in trace.rounds) / rounds
            acc[1] += sum(r.payoffs[1] for r in trace.rounds) / rounds
            acc[2] += 1
        return {pair: (s0 / n, s1 / n) for pair, (s0, s1, n) in sums.items()}

    return evaluate


@dataclass(frozen=True)
class Iteration:
    """One PSRO iteration, as logged."""

    iteration: int
    populations: tuple[tuple[str, ...], tuple[str, ...]]
    meta_strategy: tuple[dict[str, float], dict[str, float]]  # each seat's marginal, by name
    values: tuple[float, float]  # both seats' payoffs under the meta-strategy
    responses: tuple[str, str]
    gains: tuple[float, float]  # each response's payoff minus the seat's meta value
    nash_gap: float = 0.0  # NashConv of the meta-strategy's marginals on the meta-game
    cce_gap: float = 0.0  # the joint meta-strategy's distance from a CCE of the meta-game


@dataclass(frozen=True)
class PSROResult:
    """A PSRO run: the log of every iteration, why it stopped, and the final meta-game."""

    meta_solver: str
    iterations: tuple[Iteration, ...]
    stopped: Literal["converged", "closed", "iterations"]
    populations: tuple[tuple[str, ...], tuple[str, ...]]  # at the end (last responses included)
    row_payoffs: tuple[tuple[float, ...], ...]  # final meta-game, seat 0's population down
    col_payoffs: tuple[tuple[float, ...], ...]
    solution_concept: str = ""  # what the meta-solver returns (``matrix.CONCEPTS``)
    disagreement: tuple[float, float] | None = None  # nash-bargaining's point, when set

    @property
    def final(self) -> Iteration:
        """The last iteration."""
        return self.iterations[-1]

    def to_json(self) -> str:
        """The whole result as JSON."""
        return json.dumps(asdict(self), indent=2)


def psro(
    game: MetaGame,
    oracle: Oracle,
    meta_solver: str | MetaSolver = "replicator",
    *,
    initial: tuple[str, str],
    iterations: int = 20,
    tolerance: float = 1e-6,
    on_iteration: Callable[[Iteration], None] | None = None,
    disagreement: tuple[float, float] | None = None,
) -> PSROResult:
    """Returns the log of PSRO run from the populations ``initial`` for at most ``iterations``;
    each iteration logs the meta-strategy's Nash and CCE gaps on the meta-game, and the result
    names the meta-solver's solution concept. ``disagreement`` sets nash-bargaining's point.

    Raises ``KeyError`` for an unknown meta-solver name (see ``matrix.META_SOLVERS``).
    """
    name = meta_solver if isinstance(meta_solver, str) else meta_solver.__name__
    solve = meta_solver_of(meta_solver, disagreement)
    concept = CONCEPTS.get(name, "") if isinstance(meta_solver, str) else ""
    game.add(0, initial[0])
    game.add(1, initial[1])
    log: list[Iteration] = []
    stopped: Literal["converged", "closed", "iterations"] = "iterations"
    for it in range(1, iterations + 1):
        row, col = game.matrices()
        profile: Profile = solve(row, col)
        values = profile.values(row, col)
        (first, u0), (second, u1) = (
            oracle.respond(game, 0, profile.col),
            oracle.respond(game, 1, profile.row),
        )
        entry = Iteration(
            iteration=it,
            populations=(tuple(game.populations[0]), tuple(game.populations[1])),
            meta_strategy=(
                dict(zip(game.populations[0], map(float, profile.row), strict=True)),
                dict(zip(game.populations[1], map(float, profile.col), strict=True)),
            ),
            values=values,
            responses=(first, second),
            gains=(u0 - values[0], u1 - values[1]),
            nash_gap=nash_gap(profile, row, col),
            cce_gap=cce_gap(profile, row, col),
        )
        log.append(entry)
        if on_iteration is not None:
            on_iteration(entry)
        if max(entry.gains) <= tolerance:
            stopped = "converged"
            break
        grew = [game.add(0, first), game.add(1, second)]
        if not any(grew):
            stopped = "closed"
            break
    row, col = game.matrices()
    return PSROResult(
        meta_solver=name,
        iterations=tuple(log),
        stopped=stopped,
        populations=(tuple(game.populations[0]), tuple(game.populations[1])),
        row_payoffs=tuple(tuple(map(float, r)) for r in row),
        col_payoffs=tuple(tuple(map(float, r)) for r in col),
        solution_concept=concept,
        disagreement=disagreement,
    )


def meta_solver_of(
    meta_solver: str | MetaSolver, disagreement: tuple[float, float] | None
) -> MetaSolver:
    """The meta-solver a name stands for (with its disagreement point), or the callable."""
    if isinstance(meta_solver, str):
        return solver_named(meta_solver, disagreement)
    return meta_solver


def plot_meta_strategies(result: PSROResult, path: Path, title: str = "") -> Path:
    """Draws each seat's meta-strategy per iteration as stacked bars into ``path`` (PNG): one
    bar per iteration, one colour per strategy name in both panels and one legend of every
    name (so a run that stops after one iteration still shows its meta-strategy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    xs = np.array([it.iteration for it in result.iterations])
    everyone = list(
        dict.fromkeys(n for it in result.iterations for pop in it.populations for n in pop)
    )
    palette = plt.get_cmap("tab20" if len(everyone) > 10 else "tab10")
    colour = {n: palette(i % palette.N) for i, n in enumerate(everyone)}  # one per name
    for seat, ax in enumerate(axes):
        names = list(dict.fromkeys(n for it in result.iterations for n in it.populations[seat]))
        mass = np.array(
            [[it.meta_strategy[seat].get(n, 0.0) for it in result.iterations] for n in names]
        )
        bottom = np.zeros(len(xs))
        for name, row in zip(names, mass, strict=True):
            ax.bar(xs, row, bottom=bottom, width=0.8, color=colour[name], alpha=0.85)
            bottom += row
        ax.set_xlabel("PSRO iteration")
        ax.set_title(f"seat {seat}")
        ax.set_xticks(xs)
        ax.set_xlim(xs[0] - 0.6, xs[-1] + 0.6)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("meta-strategy mass")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[n], alpha=0.85) for n in everyone]
    axes[1].legend(handles, everyone, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.suptitle(title or f"PSRO meta-strategy ({result.meta_solver}, {result.stopped})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
