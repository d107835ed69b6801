"""Counterfactual regret minimisation: CFR and CFR+ on a ``Node`` tree, vectorised with numpy.

One iteration, for each player i in turn (alternating updates):

1. walk the tree with the current policy σ: reach probabilities down, values vᵢ up;
2. at every information set I of player i and action a, add the counterfactual regret
   Σ_{h ∈ I} π₋ᵢ(h) (vᵢ(ha) − vᵢ(h)) to R(I, a), where π₋ᵢ is chance × opponent reach;
3. add w_t πᵢ(I) σ(I, a) to the cumulative policy S(I, a) (πᵢ: player i's own reach);
4. CFR+ only: floor the cumulative regrets at zero, R ← max(R, 0) (regret matching+);
5. recompute σ on player i's information sets by regret matching: σ(I, a) = R⁺(I, a) / Σ_b
   R⁺(I, b), uniform when no regret is positive.

The average policy S(I, a) / Σ_b S(I, b) (uniform where S is zero) converges to a Nash
equilibrium in two-player zero-sum games. CFR (Zinkevich et al. 2007) uses w_t = 1; CFR+
(Tammelin 2014; Tammelin et al. 2015) uses regret matching+ and linear averaging, w_t = t.

Departures from the papers, all as in OpenSpiel's ``CFRSolver`` / ``CFRPlusSolver``, so that the
average policies agree after any number of iterations: CFR uses alternating updates (the 2007
paper updates both players at once); CFR+ averages with weight t and no delay (the 2015 paper
delays averaging by d iterations); the average policy of an information set never reached
by its player is uniform.

Implementation: ``CFRSolver`` flattens the tree once through the protocol (``tree.flatten``)
and runs each pass as a few numpy operations per depth: reach probabilities go down with one
gather-multiply per depth, values come up with one ``np.add.reduceat`` per depth, and the regret
and policy sums over an information set's histories are one ``np.bincount``. πᵢ(h) is the same at
every history of an information set (perfect recall), so it is read at one of them. Its naive
equivalent is ``ReferenceCFR``, a direct recursion over the protocol; tests compare the two.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stratagem.solvers.best_response import (
    best_response_values,
    flat_nash_conv,
    nash_conv,
    on_policy_values,
)
from stratagem.solvers.tree import CHANCE, TERMINAL, FlatTree, Node, flatten, infosets


@dataclass(frozen=True)
class Variant:
    """Which CFR: regret matching+ (floor regrets at 0) and linear averaging (weight t)."""

    regret_matching_plus: bool
    linear_averaging: bool


CFR = Variant(regret_matching_plus=False, linear_averaging=False)
CFR_PLUS = Variant(regret_matching_plus=True, linear_averaging=True)
ALGORITHMS: dict[str, Variant] = {"cfr": CFR, "cfr+": CFR_PLUS}


@dataclass(frozen=True)
class Blocks:
    """Consecutive runs of slots (one run per information set) and how to sum each run.

    ``pad`` lists each block's slots down its column, padded with ``S`` (a slot that holds 0), so
    ``np.add.reduce(x[pad], axis=0)`` adds each block left to right, as a Python ``sum`` does;
    ``np.add.reduceat`` would pair the terms differently and round differently.
    """

    slots: np.ndarray  # (M,) the slots of the blocks, block by block
    pad: np.ndarray  # (A, K) the slots of each block in its column, padded with S
    block: np.ndarray  # (M,) the block of each slot of ``slots``
    sizes: np.ndarray  # (M,) the size of the block of each slot of ``slots``

    @classmethod
    def of(cls, slot_start: np.ndarray, infosets: np.ndarray) -> Blocks:
        """The blocks of ``infosets``, whose slots run from ``slot_start[i]`` to
        ``slot_start[i + 1]``."""
        starts, ends = slot_start[infosets], slot_start[infosets + 1]
        sizes = ends - starts  # (K,)
        offsets = np.arange(int(sizes.max(initial=0)))  # (A,)
        legal = offsets[:, None] < sizes[None, :]  # (A, K)
        pad = np.where(legal, starts[None, :] + offsets[:, None], int(slot_start[-1]))
        block = np.repeat(np.arange(len(infosets)), sizes)
        return cls(
            slots=pad.T[legal.T],
            pad=pad,
            block=block,
            sizes=sizes[block],
        )

    def totals(self, values: np.ndarray) -> np.ndarray:
        """Returns (M,) the total of each slot's block; ``values`` is (S + 1,), last entry 0."""
        return np.add.reduce(values[self.pad], axis=0)[self.block]


def regret_matching(regrets: np.ndarray, blocks: Blocks) -> np.ndarray:
    """Returns the regret-matching policy on ``blocks.slots`` for the cumulative ``regrets`` (S,).

    Naive equivalent, per information set with regrets r: ``[max(x, 0) / t for x in r]`` where
    ``t = sum(x for x in r if x > 0)``, or ``[1 / len(r)] * len(r)`` when t is 0.
    """
    positive = np.append(np.maximum(regrets, 0.0), 0.0)  # (S + 1,)
    totals = blocks.totals(positive)  # (M,)
    share = positive[blocks.slots] / np.where(totals > 0, totals, 1.0)
    return np.where(totals > 0, share, 1.0 / blocks.sizes)


def normalise(sums: np.ndarray, blocks: Blocks) -> np.ndarray:
    """Returns ``sums`` (S,) on ``blocks.slots``, each block divided by its total, or uniform
    where the total is 0 (naive equivalent: ``[x / sum(r) for x in r]`` per block r)."""
    totals = blocks.totals(np.append(sums, 0.0))
    share = sums[blocks.slots] / np.where(totals > 0, totals, 1.0)
    return np.where(totals > 0, share, 1.0 / blocks.sizes)


@dataclass(frozen=True)
class _Level:
    """The edges out of the k-th node (depth first) of each of a player's information sets."""

    edges: np.ndarray  # (E,) child nodes
    parents: np.ndarray  # (E,) their parents
    slots: np.ndarray  # (E,) the slot of each edge; distinct within a level


class CFRSolver:
    """CFR or CFR+ with alternating updates on a flattened tree (see the module docstring).

    Every floating-point operation happens in the order of OpenSpiel's recursion (sums of
    children left to right, sums over an infoset's histories depth first, reach probabilities
    per player and chance multiplied at the end), so the average policy equals OpenSpiel's to
    the last bit or nearly; CFR+ amplifies any difference in rounding, so this order is what
    keeps the two equal beyond a hundred or so iterations on Leduc.
    """

    def __init__(self, root: Node | FlatTree, variant: Variant = CFR_PLUS) -> None:
        """Flatten ``root`` (once) and start from the uniform policy with zero regrets."""
        self.root = None if isinstance(root, FlatTree) else root
        self.tree = tree = root if isinstance(root, FlatTree) else flatten(root)
        self.variant = variant
        self.iteration = 0
        n, s = tree.n_nodes, tree.n_slots
        # the policy lives at the head of the edge-probability table: σ, chance, 1 (root)
        self._table = np.concatenate([tree.uniform(), tree.chance_probs, [1.0]])
        self.current = self._table[:s]  # (S,) σ, a view
        self.regrets = np.zeros(s)  # (S,) R
        self.policy_sums = np.zeros(s)  # (S,) S
        self._all = Blocks.of(tree.slot_start, np.arange(tree.n_infosets))
        self._blocks = tuple(
            Blocks.of(tree.slot_start, np.flatnonzero(tree.infoset_player == p)) for p in (0, 1)
        )
        self._levels = tuple(self._player_levels(p) for p in (0, 1))
        # reach columns: player 0, player 1, chance; the root's edge (probability 1) goes to chance
        self._column = np.where(tree.owner >= 0, tree.owner, 2)
        self._rows = np.arange(n)
        self._reach = np.empty((n, 3))
        self._value = np.zeros(n + 1)  # node n is the sentinel: always 0
        self._weighted = np.zeros(n + 1)
        self._depths = [
            (int(lo), int(hi), tree.parent[lo:hi])
            for lo, hi in zip(tree.depth_start[1:-1], tree.depth_start[2:], strict=True)
        ]

    def _player_levels(self, player: int) -> tuple[_Level, ...]:
        tree = self.tree
        edges = np.flatnonzero(tree.owner == player)
        parents = tree.parent[edges]
        rank = tree.visit[parents]
        levels = []
        for k in range(int(rank.max(initial=-1)) + 1):
            chosen = edges[rank == k]
            levels.append(_Level(chosen, tree.parent[chosen], tree.edge[chosen]))
        return tuple(levels)

    def iterate(self, iterations: int = 1) -> None:
        """Run ``iterations`` iterations (each updates player 0, then player 1)."""
        for _ in range(iterations):
            self.iteration += 1
            for player in (0, 1):
                self._update(player)

    def _update(self, player: int) -> None:
        tree = self.tree
        probs = self._table[tree.edge]  # (N,)
        reach = self._reach  # (N, 3)
        reach.fill(1.0)
        reach[self._rows, self._column] = probs
        for lo, hi, parents in self._depths:
            reach[lo:hi] *= reach[parents]
        value, weighted = self._value, self._weighted  # (N + 1,) each
        value[:-1] = tree.payoffs[:, player]
        for d in range(len(self._depths) - 1, -1, -1):
            lo, hi, _ = self._depths[d]
            np.multiply(probs[lo:hi], value[lo:hi], out=weighted[lo:hi])
            value[tree.internal[d]] = np.add.reduce(weighted[tree.children[d]], axis=0)
        weight = float(self.iteration) if self.variant.linear_averaging else 1.0
        for level in self._levels[player]:  # one history per infoset at a time, depth first
            parents = level.parents
            counterfactual = reach[parents, 1 - player] * reach[parents, 2]  # π₋ᵢ
            self.regrets[level.slots] += counterfactual * (value[level.edges] - value[parents])
            own = weight * reach[parents, player]  # w_t πᵢ
            self.policy_sums[level.slots] += own * self.current[level.slots]
        if self.variant.regret_matching_plus:
            np.maximum(self.regrets, 0.0, out=self.regrets)
        blocks = self._blocks[player]
        self.current[blocks.slots] = regret_matching(self.regrets, blocks)

    def average_policy_array(self) -> np.ndarray:
        """Returns (S,) the average policy over slots."""
        out = np.empty(self.tree.n_slots)
        out[self._all.slots] = normalise(self.policy_sums, self._all)
        return out

    def average_policy(self) -> dict[str, dict[str, float]]:
        """Returns the average policy as ``infoset -> {action: probability}``."""
        return self.tree.policy_dict(self.average_policy_array())

    def current_policy(self) -> dict[str, dict[str, float]]:
        """Returns the policy of the last iteration (which need not converge)."""
        return self.tree.policy_dict(self.current)

    def nash_conv(self) -> float:
        """Returns the NashConv of the average policy (exact, on the flattened tree)."""
        if self.tree.infoset_depth_aligned:
            return flat_nash_conv(self.tree, self.average_policy_array())
        if self.root is None:
            raise ValueError("this tree needs the recursive best response: pass the root node")
        return nash_conv(self.root, self.average_policy())

    def exploitability(self) -> float:
        """Returns NashConv / 2 of the average policy (zero-sum games)."""
        return self.nash_conv() / 2

    def value(self) -> tuple[float, float]:
        """Returns both players' expected payoffs when both play the average policy."""
        v = on_policy_values(self.tree, self.average_policy_array())
        return float(v[0]), float(v[1])

    def best_response_values(self) -> tuple[float, float]:
        """Returns each player's best-response value against the average policy."""
        v = best_response_values(self.tree, self.average_policy_array())
        return float(v[0]), float(v[1])


class ReferenceCFR:
    """The readable CFR / CFR+: a recursion over the ``Node`` protocol with dictionaries.

    It computes exactly what ``CFRSolver`` computes, one history at a time, and is what tests
    compare the vectorised solver against.
    """

    def __init__(self, root: Node, variant: Variant = CFR_PLUS) -> None:
        """Start from the uniform policy with zero regrets."""
        self.root = root
        self.variant = variant
        self.iteration = 0
        self.infosets = infosets(root)
        self.current = {
            k: {a: 1 / len(acts) for a in acts} for k, (_, acts) in self.infosets.items()
        }
        self.regrets: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.policy_sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def iterate(self, iterations: int = 1) -> None:
        """Run ``iterations`` iterations (each updates player 0, then player 1)."""
        for _ in range(iterations):
            self.iteration += 1
            for player in (0, 1):
                self._walk(self.root, player, (1.0, 1.0, 1.0))
                for key, (owner, actions) in self.infosets.items():
                    if owner != player:
                        continue
                    regrets = self.regrets[key]
                    if self.variant.regret_matching_plus:
                        for a in actions:
                            regrets[a] = max(regrets[a], 0.0)
                    positive = {a: max(regrets[a], 0.0) for a in actions}
                    total = sum(positive.values())
                    self.current[key] = {
                        a: positive[a] / total if total > 0 else 1 / len(actions) for a in actions
                    }

    def _walk(self, node: Node, player: int, reach: tuple[float, float, float]) -> float:
        """Returns ``player``'s value of ``node`` under the current policy; updates sums on the
        way. ``reach`` is (player 0's, player 1's, chance's) reach probability of ``node``."""
        if node.player == TERMINAL:
            return node.returns()[player]
        if node.player == CHANCE:
            return sum(
                p * self._walk(node.child(a), player, (reach[0], reach[1], reach[2] * p))
                for a, p in zip(node.actions(), node.chances(), strict=True)
            )
        mover, key = node.player, node.infoset()
        sigma = self.current[key]
        children = {}
        for a in node.actions():
            nxt = list(reach)
            nxt[mover] *= sigma[a]
            children[a] = self._walk(node.child(a), player, (nxt[0], nxt[1], nxt[2]))
        value = sum(sigma[a] * children[a] for a in node.actions())
        if mover == player:
            counterfactual = reach[1 - mover] * reach[2]
            weight = self.iteration if self.variant.linear_averaging else 1
            for a in node.actions():
                self.regrets[key][a] += counterfactual * (children[a] - value)
                self.policy_sums[key][a] += weight * reach[mover] * sigma[a]
        return value

    def average_policy(self) -> dict[str, dict[str, float]]:
        """Returns the average policy as ``infoset -> {action: probability}``."""
        out = {}
        for key, (_, actions) in self.infosets.items():
            sums = self.policy_sums[key]
            total = sum(sums[a] for a in actions)
            out[key] = {a: sums[a] / total if total > 0 else 1 / len(actions) for a in actions}
        return out

    def nash_conv(self) -> float:
        """Returns the NashConv of the average policy."""
        return nash_conv(self.root, self.average_policy())


@dataclass(frozen=True)
class Solution:
    """What ``solve`` returns: the average policy, its value, and the exploitability curve."""

    algorithm: str
    iterations: int
    policy: dict[str, dict[str, float]]
    value: tuple[float, float]  # both players' payoffs under the average policy
    exploitability: float  # NashConv / 2 of the average policy
    curve: tuple[tuple[int, float], ...]  # (iteration, exploitability) at the checkpoints
    seconds: float  # time spent iterating (checkpoints excluded)


def checkpoints(iterations: int, count: int = 60) -> list[int]:
    """Returns about ``count`` iteration numbers spaced evenly on a log scale, ending at
    ``iterations``."""
    points = np.unique(np.geomspace(1, iterations, num=min(count, iterations)).round().astype(int))
    return [int(x) for x in points]


def solve(
    root: Node,
    algorithm: str = "cfr+",
    iterations: int = 1000,
    *,
    points: int = 60,
    on_checkpoint: Callable[[int, float], None] | None = None,
) -> Solution:
    """Returns the ``algorithm`` ("cfr" or "cfr+") solution of ``root`` after ``iterations``,
    with the exploitability of the average policy at about ``points`` log-spaced iterations."""
    import time

    solver = CFRSolver(root, ALGORITHMS[algorithm])
    curve: list[tuple[int, float]] = []
    seconds = 0.0
    for target in checkpoints(iterations, points):
        start = time.perf_counter()
        solver.iterate(target - solver.iteration)
        seconds += time.perf_counter() - start
        curve.append((target, solver.exploitability()))
        if on_checkpoint is not None:
            on_checkpoint(*curve[-1])
    return Solution(
        algorithm=algorithm,
        iterations=iterations,
        policy=solver.average_policy(),
        value=solver.value(),
        exploitability=curve[-1][1],
        curve=tuple(curve),
        seconds=seconds,
    )
