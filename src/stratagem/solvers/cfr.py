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
gather-multiply per depth, values come up with one gather-and-sum per depth, and the regret and
policy sums over an information set's histories are one ``np.add.at`` each. Every floating-point
operation happens in the order of a recursion over the tree (and of OpenSpiel's): children are
added left to right, an information set's histories depth first, and π₋ᵢ is the opponent's reach
times chance's, each kept apart on the way down. The average policy is then OpenSpiel's to the
last bit. That matters: regret matching+ turns a rounding difference in a regret near zero into
a different policy, and two implementations that sum in different orders drift apart (measured
on Leduc: 5e-4 in the average policy after 150 CFR+ iterations, 2e-2 after 200). Its naive
equivalent is ``ReferenceCFR``, a direct recursion over the protocol; tests compare the two bit
for bit.
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
from stratagem.solvers.tree import FlatTree, flatten
from stratagem.tree import CHANCE, TERMINAL, Node, infosets


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

    ``pad`` lists each block's slots down its column, padded with ``S``, a slot that must hold 0:
    ``np.add.reduce(x[pad], axis=0)`` then adds each block left to right, as a Python ``sum``
    does; ``np.add.reduceat`` would pair the terms differently and round differently.
    """

    slots: np.ndarray  # (M,) the slots of the blocks, block by block
    pad: np.ndarray  # (A, K) the slots of each block in its column, padded with S
    block: np.ndarray  # (M,) the block of each slot of ``slots``
    uniform: np.ndarray  # (M,) 1 / the size of each slot's block

    @classmethod
    def of(cls, slot_start: np.ndarray, infosets: np.ndarray) -> Blocks:
        """Returns the blocks of ``infosets``, whose slots run from ``slot_start[i]`` to
        ``slot_start[i + 1]``."""
        starts, ends = slot_start[infosets], slot_start[infosets + 1]
        sizes = ends - starts  # (K,)
        offsets = np.arange(int(sizes.max(initial=0)))  # (A,)
        legal = offsets[:, None] < sizes[None, :]  # (A, K)
        pad = np.where(legal, starts[None, :] + offsets[:, None], int(slot_start[-1]))
        block = np.repeat(np.arange(len(infosets)), sizes)
        return cls(slots=pad.T[legal.T], pad=pad, block=block, uniform=1.0 / sizes[block])

    def totals(self, values: np.ndarray) -> np.ndarray:
        """Returns (M,) the total of each slot's block; ``values`` is (S + 1,), last entry 0."""
        return np.add.reduce(values[self.pad], axis=0)[self.block]


def regret_matching(regrets: np.ndarray, blocks: Blocks) -> np.ndarray:
    """Returns the regret-matching policy on ``blocks.slots`` for cumulative ``regrets``.

    ``regrets`` is (S + 1,): one entry per slot, then a 0 for the padding. Naive equivalent, per
    information set with regrets r: ``[max(x, 0) / t for x in r]`` where
    ``t = sum(x for x in r if x > 0)``, or ``[1 / len(r)] * len(r)`` when t is 0.
    """
    positive = np.maximum(regrets, 0.0)  # (S + 1,)
    totals = blocks.totals(positive)  # (M,)
    out = blocks.uniform.copy()
    np.divide(positive[blocks.slots], totals, out=out, where=totals > 0)
    return out


def normalise(sums: np.ndarray, blocks: Blocks) -> np.ndarray:
    """Returns ``sums`` on ``blocks.slots``, each block divided by its total, or uniform where
    the total is 0. ``sums`` is (S + 1,), last entry 0. Naive equivalent, per block r:
    ``[x / sum(r) for x in r]``, or ``[1 / len(r)] * len(r)`` when the sum is 0."""
    totals = blocks.totals(sums)
    out = blocks.uniform.copy()
    np.divide(sums[blocks.slots], totals, out=out, where=totals > 0)
    return out


@dataclass(frozen=True)
class _Edges:
    """The edges out of one player's nodes, ordered so that the edges of each slot come in the
    depth-first order of their histories (the order in which a recursion adds them up)."""

    nodes: np.ndarray  # (E,) child nodes
    parents: np.ndarray  # (E,) their parents
    slots: np.ndarray  # (E,) the slot of each edge
    nodes_then_parents: np.ndarray  # (2E,)


class CFRSolver:
    """CFR or CFR+ with alternating updates on a flattened tree (see the module docstring),
    its floating-point operations in the order of ``ReferenceCFR`` and OpenSpiel's solvers."""

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
        # regrets and policy sums carry one more entry, always 0, for the padding of ``Blocks``
        self._regrets = np.zeros(s + 1)
        self._policy_sums = np.zeros(s + 1)
        self.regrets = self._regrets[:s]  # (S,) R, a view
        self.policy_sums = self._policy_sums[:s]  # (S,) S, a view
        self._all = Blocks.of(tree.slot_start, np.arange(tree.n_infosets))
        self._blocks = tuple(
            Blocks.of(tree.slot_start, np.flatnonzero(tree.infoset_player == p)) for p in (0, 1)
        )
        self._edges = tuple(self._player_edges(p) for p in (0, 1))
        # reach columns: player 0, player 1, chance (the root's edge, probability 1, is chance's);
        # ``_factor`` holds each node's edge probability in its owner's column and 1 elsewhere
        self._cell = (np.arange(n), np.where(tree.owner >= 0, tree.owner, 2))
        self._factor = np.ones((n, 3))
        self._reach = np.ones((n, 3))  # the root's row stays 1
        self._value = np.zeros(n + 1)  # node n is the sentinel: always 0
        self._weighted = np.zeros(n + 1)
        self._down, self._up = zip(*(self._passes(p) for p in (0, 1)), strict=True)

    def _passes(self, player: int) -> tuple[list, list]:
        """The depths a pass of ``player`` walks: reach down to the player's deepest decision
        nodes, values up to its shallowest ones (nothing else is read)."""
        tree = self.tree
        starts = [int(x) for x in tree.depth_start]
        depth = np.searchsorted(tree.depth_start, np.flatnonzero(tree.player == player), "right")
        if not len(depth):  # the player never moves
            return [], []
        shallowest, deepest = int(depth.min()) - 1, int(depth.max()) - 1
        down = [
            (starts[d], starts[d + 1], tree.parent[starts[d] : starts[d + 1]])
            for d in range(1, deepest + 1)
        ]
        up = []  # (children's slice, parents' slice, padded children), deepest first
        for d in range(len(tree.internal) - 1, shallowest - 1, -1):
            k = len(tree.internal[d])
            if k:  # flatten puts a depth's internal nodes first
                assert np.array_equal(tree.internal[d], np.arange(starts[d], starts[d] + k))
                up.append(
                    (starts[d + 1], starts[d + 2], starts[d], starts[d] + k, tree.children[d])
                )
        return down, up

    def _player_edges(self, player: int) -> _Edges:
        tree = self.tree
        edges = np.flatnonzero(tree.owner == player)
        edges = edges[np.argsort(tree.visit[tree.parent[edges]], kind="stable")]
        parents = tree.parent[edges]
        return _Edges(edges, parents, tree.edge[edges], np.concatenate([edges, parents]))

    def iterate(self, iterations: int = 1) -> None:
        """Run ``iterations`` iterations (each updates player 0, then player 1)."""
        for _ in range(iterations):
            self.iteration += 1
            for player in (0, 1):
                self._update(player)

    def _update(self, player: int) -> None:
        tree = self.tree
        probs = self._table[tree.edge]  # (N,)
        factor, reach = self._factor, self._reach  # (N, 3) each
        factor[self._cell] = probs
        for lo, hi, parents in self._down[player]:  # π(child) = π(parent) × its edge, per column
            np.multiply(factor[lo:hi], reach[parents], out=reach[lo:hi])
        value, weighted = self._value, self._weighted  # (N + 1,) each
        value[:-1] = tree.payoffs[:, player]
        for lo, hi, ilo, ihi, children in self._up[player]:  # v(h) = Σ_a σ(a) v(ha), left to right
            np.multiply(probs[lo:hi], value[lo:hi], out=weighted[lo:hi])
            np.add.reduce(weighted[children], axis=0, out=value[ilo:ihi])
        edges = self._edges[player]
        e = len(edges.nodes)
        at = reach[edges.parents]  # (E, 3)
        both = value[edges.nodes_then_parents]  # (2E,) v(ha), then v(h)
        counterfactual = at[:, 1 - player] * at[:, 2]  # π₋ᵢ: opponent × chance
        weight = float(self.iteration) if self.variant.linear_averaging else 1.0
        # np.add.at adds in array order: each slot's histories one after another, depth first
        np.add.at(self.regrets, edges.slots, counterfactual * (both[:e] - both[e:]))
        np.add.at(self.policy_sums, edges.slots, weight * at[:, player] * self.current[edges.slots])
        if self.variant.regret_matching_plus:
            np.maximum(self._regrets, 0.0, out=self._regrets)
        blocks = self._blocks[player]
        self.current[blocks.slots] = regret_matching(self._regrets, blocks)

    def average_policy_array(self) -> np.ndarray:
        """Returns (S,) the average policy over slots."""
        out = np.empty(self.tree.n_slots)
        out[self._all.slots] = normalise(self._policy_sums, self._all)
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
    """Returns at most ``count`` iteration numbers spaced evenly on a log scale, from 1 to
    ``iterations`` (every iteration when ``count`` covers them all); the last is always
    ``iterations``, so one checkpoint is the final policy."""
    if count <= 1:
        return [iterations]
    if count >= iterations:
        return list(range(1, iterations + 1))
    points = np.unique(np.geomspace(1, iterations, num=count).round().astype(int))
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
