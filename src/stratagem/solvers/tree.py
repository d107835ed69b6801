"""Solver-side tree tools: expected returns under a policy, and ``flatten``, which walks a tree
once, breadth first, through the ``Node`` protocol (``stratagem.tree``) and lays it out as numpy
arrays per depth, for the vectorised CFR and best response (``solvers.cfr``,
``solvers.best_response``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stratagem.tree import CHANCE, TERMINAL, Node, Policy


def weights(node: Node, policy: Policy) -> tuple[float, ...]:
    """The probability of each of ``node``'s actions: chance's, or ``policy``'s at a decision."""
    if node.player == CHANCE:
        return node.chances()
    dist = policy[node.infoset()]
    return tuple(dist.get(a, 0.0) for a in node.actions())


def expected_returns(node: Node, policy: Policy) -> tuple[float, float]:
    """Returns both players' expected payoffs below ``node`` when both follow ``policy``."""
    if node.player == TERMINAL:
        return node.returns()
    v0 = v1 = 0.0
    for w, action in zip(weights(node, policy), node.actions(), strict=True):
        if w:
            c0, c1 = expected_returns(node.child(action), policy)
            v0 += w * c0
            v1 += w * c1
    return v0, v1


@dataclass(frozen=True)
class FlatTree:
    """A tree laid out breadth first as arrays, for vectorised solvers (built by ``flatten``).

    Nodes are numbered depth by depth, each depth's internal nodes before its terminal ones, and
    node ``N`` (one past the last) is a sentinel whose value is always 0. ``children[d]`` lists,
    for each internal node of depth d, its children in action order, padded with the sentinel:
    summing its rows one after the other adds each node's children left to right, exactly as a
    recursion does. A *slot* is one (information set, action) pair; an infoset's slots are
    consecutive. Every edge (a node with its parent) reads its probability from
    ``table[edge[n]]``, where ``table`` is the policy over slots followed by the tree's chance
    probabilities (and a 1 for the root).
    """

    depth_start: np.ndarray  # (D + 1,) first node of each depth, then N
    player: np.ndarray  # (N,) 0, 1, CHANCE or TERMINAL
    parent: np.ndarray  # (N,) parent node, -1 at the root
    edge: np.ndarray  # (N,) index into the policy-then-chance table
    owner: np.ndarray  # (N,) player of the parent (0, 1 or CHANCE), TERMINAL at the root
    payoffs: np.ndarray  # (N, 2) returns at terminal nodes, 0 elsewhere
    internal: tuple[np.ndarray, ...]  # per depth: its internal nodes (the depth's first ones)
    children: tuple[np.ndarray, ...]  # per depth: (K_d, len(internal[d])) children, padded with N
    visit: np.ndarray  # (N,) rank of each decision node among its infoset's nodes, depth first
    chance_probs: np.ndarray  # (C,) one entry per chance edge
    keys: tuple[str, ...]  # (I,) information-set keys
    infoset_player: np.ndarray  # (I,) 0 or 1
    infoset_actions: tuple[tuple[str, ...], ...]  # (I,)
    slot_start: np.ndarray  # (I + 1,) first slot of each infoset, then S
    slot_infoset: np.ndarray  # (S,) infoset of each slot
    infoset_node: np.ndarray  # (I,) one node of each infoset (its first, depth first)
    infoset_depth_aligned: bool  # every infoset's nodes lie at one depth

    @property
    def n_nodes(self) -> int:
        """The number of nodes N (the sentinel excluded)."""
        return len(self.player)

    @property
    def n_slots(self) -> int:
        """The number of (information set, action) slots S."""
        return int(self.slot_start[-1])

    @property
    def n_infosets(self) -> int:
        """The number of information sets I."""
        return len(self.keys)

    def edge_probs(self, policy: np.ndarray) -> np.ndarray:
        """Returns (N,) the probability of the edge into each node under the slot ``policy``
        (1 at the root)."""
        table = np.concatenate([policy, self.chance_probs, [1.0]])
        return table[self.edge]

    def policy_array(self, policy: Policy) -> np.ndarray:
        """Returns (S,) the slot probabilities of ``policy`` (``infoset -> {action: prob}``)."""
        out = np.zeros(self.n_slots)
        for i, (key, acts) in enumerate(zip(self.keys, self.infoset_actions, strict=True)):
            dist = policy[key]
            start = self.slot_start[i]
            out[start : start + len(acts)] = [dist.get(a, 0.0) for a in acts]
        return out

    def policy_dict(self, policy: np.ndarray) -> dict[str, dict[str, float]]:
        """Returns the slot array ``policy`` as ``infoset -> {action: prob}``."""
        out = {}
        for i, (key, acts) in enumerate(zip(self.keys, self.infoset_actions, strict=True)):
            start = self.slot_start[i]
            out[key] = {
                a: float(p) for a, p in zip(acts, policy[start : start + len(acts)], strict=True)
            }
        return out

    def uniform(self) -> np.ndarray:
        """Returns (S,) the uniform policy."""
        counts = np.diff(self.slot_start)
        return 1.0 / counts[self.slot_infoset]


# a frontier entry: (node, parent, edge reference, position among the parent's children)
_Entry = tuple[Node, int, tuple[int, int], int]


@dataclass
class _Walk:
    """What ``flatten``'s walk has gathered so far: one entry per node, in breadth-first
    numbering, and one per information set, in order of first visit."""

    player: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    edge_ref: list[tuple[int, int]] = field(default_factory=list)  # (infoset, action) or (-1, id)
    payoffs: list[tuple[float, float]] = field(default_factory=list)
    kids: list[list[int]] = field(default_factory=list)
    node_infoset: list[int] = field(default_factory=list)
    chance_probs: list[float] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    inf_player: list[int] = field(default_factory=list)
    inf_actions: list[tuple[str, ...]] = field(default_factory=list)
    inf_depths: list[set[int]] = field(default_factory=list)
    depth_start: list[int] = field(default_factory=lambda: [0])

    def add(self, entry: _Entry, depth: int) -> list[_Entry]:
        """Numbers the frontier ``entry``'s node (at ``depth``) and returns its children's
        entries, in action order; raises ``ValueError`` like ``flatten``."""
        node, up, ref, position = entry
        n = len(self.player)
        self.player.append(node.player)
        self.parent.append(up)
        self.edge_ref.append(ref)
        self.kids.append([])
        self.node_infoset.append(-1)
        if up >= 0:
            self.kids[up][position] = n
        self.payoffs.append(node.returns() if node.player == TERMINAL else (0.0, 0.0))
        if node.player == TERMINAL:
            return []
        actions = node.actions()
        self.kids[n] = [-1] * len(actions)
        if node.player == CHANCE:
            refs = [(-1, len(self.chance_probs) + k) for k in range(len(actions))]
            self.chance_probs.extend(node.chances())
        else:
            i = self.infoset(node, actions, depth)
            self.node_infoset[n] = i
            refs = [(i, k) for k in range(len(actions))]
        return [
            (node.child(a), n, r, k) for k, (a, r) in enumerate(zip(actions, refs, strict=True))
        ]

    def infoset(self, node: Node, actions: tuple[str, ...], depth: int) -> int:
        """Returns the index of decision ``node``'s information set (registered on its first
        visit) and records ``depth`` as one of its depths; raises ``ValueError`` when the
        node disagrees with the set's earlier nodes on player or actions."""
        key = node.infoset()
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.keys)
            self.keys.append(key)
            self.inf_player.append(node.player)
            self.inf_actions.append(actions)
            self.inf_depths.append(set())
        elif self.inf_player[i] != node.player or self.inf_actions[i] != actions:
            raise ValueError(f"information set {key!r}: nodes disagree on player/actions")
        self.inf_depths[i].add(depth)
        return i


def _walk(root: Node) -> _Walk:
    """Returns ``root``'s tree walked once, breadth first, each depth's internal nodes numbered
    before its terminal ones; raises ``ValueError`` like ``flatten``."""
    walk = _Walk()
    frontier: list[_Entry] = [(root, -1, (-2, 0), 0)]
    depth = 0
    while frontier:
        nxt: list[_Entry] = []
        # internal nodes first, then terminals: a depth's internal nodes are one slice
        frontier.sort(key=lambda item: item[0].player == TERMINAL)
        for entry in frontier:
            nxt.extend(walk.add(entry, depth))
        walk.depth_start.append(len(walk.player))
        frontier = nxt
        depth += 1
    return walk


def _edges(edge_ref: list[tuple[int, int]], slot_start: np.ndarray, n_chance: int) -> np.ndarray:
    """Returns each node's index into the policy-then-chance table: its slot, its chance edge
    after the S slots, or the table's last entry (the 1) for the root."""
    n_slots = int(slot_start[-1])
    return np.array(
        [
            slot_start[i] + k if i >= 0 else n_slots + (k if i == -1 else n_chance)
            for i, k in edge_ref
        ],
        dtype=np.int64,
    )


def flatten(root: Node) -> FlatTree:
    """Returns ``root`` walked once, breadth first, through the ``Node`` protocol as a
    ``FlatTree``; raises ``ValueError`` when two nodes of one information set disagree on
    player or actions."""
    walk = _walk(root)
    keys, inf_actions = walk.keys, walk.inf_actions
    internal, children = _padded_children(walk.kids, walk.depth_start)
    visit, infoset_node = _visits(walk.kids, walk.node_infoset, len(keys))
    slot_start = np.zeros(len(keys) + 1, dtype=np.int64)
    slot_start[1:] = np.cumsum([len(a) for a in inf_actions])
    players = np.asarray(walk.player, dtype=np.int64)
    parents = np.asarray(walk.parent, dtype=np.int64)
    return FlatTree(
        depth_start=np.asarray(walk.depth_start, dtype=np.int64),
        player=players,
        parent=parents,
        edge=_edges(walk.edge_ref, slot_start, len(walk.chance_probs)),
        owner=np.where(parents >= 0, players[np.maximum(parents, 0)], TERMINAL),
        payoffs=np.asarray(walk.payoffs, dtype=np.float64).reshape(-1, 2),
        internal=internal,
        children=children,
        visit=visit,
        chance_probs=np.asarray(walk.chance_probs, dtype=np.float64),
        keys=tuple(keys),
        infoset_player=np.asarray(walk.inf_player, dtype=np.int64),
        infoset_actions=tuple(inf_actions),
        slot_start=slot_start,
        slot_infoset=np.repeat(np.arange(len(keys)), np.diff(slot_start)),
        infoset_node=infoset_node,
        infoset_depth_aligned=all(len(d) == 1 for d in walk.inf_depths),
    )


def _padded_children(
    kids: list[list[int]], depth_start: list[int]
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Per depth: its internal nodes, and their children down columns padded with N."""
    n_nodes = len(kids)
    internal, children = [], []
    for lo, hi in zip(depth_start[:-1], depth_start[1:], strict=True):
        inner = [n for n in range(lo, hi) if kids[n]]
        width = max((len(kids[n]) for n in inner), default=0)
        padded = np.full((width, len(inner)), n_nodes, dtype=np.int64)
        for j, n in enumerate(inner):
            padded[: len(kids[n]), j] = kids[n]
        internal.append(np.asarray(inner, dtype=np.int64))
        children.append(padded)
    return tuple(internal), tuple(children)


def _visits(
    kids: list[list[int]], node_infoset: list[int], n_infosets: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each decision node's rank among its infoset's nodes in depth-first order (the order of a
    recursion's visits, which sums over an infoset's histories follow), and each infoset's
    first node."""
    visit = np.zeros(len(kids), dtype=np.int64)
    seen = [0] * n_infosets
    first = np.full(n_infosets, -1, dtype=np.int64)
    stack = [0]
    while stack:
        n = stack.pop()
        i = node_infoset[n]
        if i >= 0:
            visit[n] = seen[i]
            if seen[i] == 0:
                first[i] = n
            seen[i] += 1
        stack.extend(reversed(kids[n]))
    return visit, first
