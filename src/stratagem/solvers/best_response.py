"""Best response, NashConv and exploitability on a two-player tree with perfect recall (SPEC §9).

The best responder picks, at each of its information sets, the action that maximises the sum over
the histories in that set of (chance × opponent reach) × the value of the action; values below an
information set only involve deeper information sets, so one memoised recursion suffices. This is
OpenSpiel's ``best_response.BestResponsePolicy`` computation; NashConv is Σᵢ (best-response
value − on-policy value), which is meaningful in general-sum games; exploitability is NashConv / 2
(the mean gain of a best responder in a zero-sum game).

``best_response_values`` is the same computation vectorised over a ``FlatTree``, depth by depth
(it needs every information set's nodes at one depth, which ``flatten`` records); CFR uses it to
trace exploitability curves. Its naive equivalent is ``best_response_value`` per player.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from stratagem.solvers.tree import FlatTree, expected_returns, weights
from stratagem.tree import TERMINAL, Node, Policy, walk


def best_response_value(root: Node, player: int, policy: Policy) -> float:
    """Returns the value ``player`` earns by best-responding to the other player's ``policy``."""
    return _best_response(root, player, policy)[0]


def best_response_policy(root: Node, player: int, policy: Policy) -> dict[str, dict[str, float]]:
    """Returns a pure best response of ``player`` to the other player's ``policy``, as
    ``infoset -> {action: 1.0}`` for every information set of the player (those its own
    choices never reach get their first action)."""
    _, choice = _best_response(root, player, policy)
    out = {}
    for node in walk(root):
        if node.player == player and node.infoset() not in out:
            key = node.infoset()
            out[key] = {choice.get(key, node.actions()[0]): 1.0}
    return out


def _best_response(root: Node, player: int, policy: Policy) -> tuple[float, dict[str, str]]:
    """The best-response value, and the action chosen at each information set visited."""
    members: dict[str, list[tuple[Node, float]]] = defaultdict(list)
    _collect(root, player, policy, 1.0, members)
    choice: dict[str, str] = {}

    def value(node: Node) -> float:
        if node.player == TERMINAL:
            return node.returns()[player]
        if node.player == player:
            return value(node.child(best_action(node.infoset())))
        return sum(
            w * value(node.child(a))
            for w, a in zip(weights(node, policy), node.actions(), strict=True)
            if w
        )

    def best_action(key: str) -> str:
        if key not in choice:
            nodes = members[key]
            actions = nodes[0][0].actions()
            totals = [sum(w * value(n.child(a)) for n, w in nodes) for a in actions]
            choice[key] = actions[max(range(len(actions)), key=totals.__getitem__)]
        return choice[key]

    return value(root), choice


def _collect(
    node: Node,
    player: int,
    policy: Policy,
    reach: float,
    members: dict[str, list[tuple[Node, float]]],
) -> None:
    """Group ``player``'s decision nodes by information set, with chance × opponent reach."""
    if node.player == TERMINAL:
        return
    if node.player == player:
        members[node.infoset()].append((node, reach))
        for action in node.actions():
            _collect(node.child(action), player, policy, reach, members)
        return
    for w, action in zip(weights(node, policy), node.actions(), strict=True):
        _collect(node.child(action), player, policy, reach * w, members)


def nash_conv(root: Node, policy: Policy) -> float:
    """Returns Σ over players of (best-response value − on-policy value); 0 exactly at a Nash
    equilibrium, in general-sum games too."""
    on_policy = expected_returns(root, policy)
    return sum(best_response_value(root, p, policy) - on_policy[p] for p in (0, 1))


def exploitability(root: Node, policy: Policy) -> float:
    """Returns NashConv / 2: in a zero-sum game, the mean gain of a best responder over both
    seats."""
    return nash_conv(root, policy) / 2


def best_response_values(tree: FlatTree, policy: np.ndarray) -> np.ndarray:
    """Returns (2,) each player's best-response value against the slot array ``policy``.

    Naive equivalent: ``[best_response_value(root, p, tree.policy_dict(policy)) for p in (0, 1)]``.
    Raises ``ValueError`` when an information set spans several depths.
    """
    if not tree.infoset_depth_aligned:
        raise ValueError("vectorised best response needs each information set at one depth")
    probs = tree.edge_probs(policy)  # (N,)
    out = np.empty(2)
    for player in (0, 1):
        # chance × opponent reach of every node: the player's own moves count as 1
        reach = _forward(tree, np.where(tree.owner == player, 1.0, probs))  # (N,)
        out[player] = _backward_best(tree, player, probs, reach)
    return out


def on_policy_values(tree: FlatTree, policy: np.ndarray) -> np.ndarray:
    """Returns (2,) both players' expected payoffs when both follow the slot array ``policy``."""
    probs = tree.edge_probs(policy)  # (N,)
    value = np.zeros((tree.n_nodes + 1, 2))  # the sentinel row stays 0
    value[:-1] = tree.payoffs
    for d in range(len(tree.internal) - 1, -1, -1):
        if not len(tree.internal[d]):
            continue
        lo, hi = tree.depth_start[d + 1], tree.depth_start[d + 2]
        value[lo:hi] *= probs[lo:hi, None]  # now the weighted child values
        value[tree.internal[d]] = np.add.reduce(value[tree.children[d]], axis=0)
    return value[0]


def flat_nash_conv(tree: FlatTree, policy: np.ndarray) -> float:
    """Returns the NashConv of the slot array ``policy`` (naive equivalent: ``nash_conv``)."""
    return float(np.sum(best_response_values(tree, policy) - on_policy_values(tree, policy)))


def _forward(tree: FlatTree, factor: np.ndarray) -> np.ndarray:
    """Returns (N,) the product of ``factor`` over each node's path from the root."""
    reach = factor.copy()
    for d in range(1, len(tree.depth_start) - 1):
        lo, hi = tree.depth_start[d], tree.depth_start[d + 1]
        reach[lo:hi] *= reach[tree.parent[lo:hi]]
    return reach


def _backward_best(tree: FlatTree, player: int, probs: np.ndarray, reach: np.ndarray) -> float:
    """Returns the root value with ``player`` best-responding (first best action on ties)."""
    value = np.zeros(tree.n_nodes + 1)  # the sentinel stays 0
    value[:-1] = tree.payoffs[:, player]
    for d in range(len(tree.internal) - 1, -1, -1):
        if not len(tree.internal[d]):
            continue
        lo, hi = tree.depth_start[d + 1], tree.depth_start[d + 2]
        weight = probs[lo:hi].copy()  # (n,) edge weights into depth d + 1
        mine = tree.owner[lo:hi] == player  # (n,) edges out of the player's nodes
        if mine.any():
            kids = np.arange(lo, hi)[mine]
            slots = tree.edge[kids]
            # q(I, a) = Σ_{h ∈ I} π₋ᵢ(h) v(ha); all of I's nodes are at depth d
            q = np.bincount(
                slots, weights=reach[tree.parent[kids]] * value[kids], minlength=tree.n_slots
            )
            weight[mine] = _first_argmax_slots(tree, q, np.unique(tree.slot_infoset[slots]))[slots]
        value[lo:hi] *= weight
        value[tree.internal[d]] = np.add.reduce(value[tree.children[d]], axis=0)
    return float(value[0])


def _first_argmax_slots(tree: FlatTree, q: np.ndarray, infosets: np.ndarray) -> np.ndarray:
    """(S,) 1.0 at the first maximal slot of each listed information set, 0 elsewhere."""
    chosen = np.zeros(tree.n_slots)
    starts = tree.slot_start[infosets]  # (K,)
    sizes = tree.slot_start[infosets + 1] - starts  # (K,)
    offsets = np.arange(int(sizes.max()))  # (A,)
    legal = offsets[None, :] < sizes[:, None]  # (K, A)
    index = np.where(legal, starts[:, None] + offsets[None, :], 0)  # (K, A)
    padded = np.where(legal, q[index], -np.inf)  # (K, A)
    chosen[starts + np.argmax(padded, axis=1)] = 1.0  # argmax takes the first maximum
    return chosen
