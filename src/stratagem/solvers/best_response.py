"""Best response, NashConv and exploitability on a two-player tree (perfect recall).

The best responder picks, at each of its information sets, the action that maximises the sum over
the histories in that set of (chance × opponent reach) × the value of the action; values below an
information set only involve deeper information sets, so one memoised recursion suffices.
"""

from __future__ import annotations

from collections import defaultdict

from stratagem.solvers.tree import CHANCE, Node, Policy, expected_returns


def best_response_value(root: Node, player: int, policy: Policy) -> float:
    """The value ``player`` earns by best-responding to ``policy`` of the other player."""
    members: dict[str, list[tuple[Node, float]]] = defaultdict(list)
    _collect(root, player, policy, 1.0, members)
    choice: dict[str, int] = {}

    def value(node: Node) -> float:
        if node.is_terminal:
            return node.returns[player]
        if node.player == CHANCE:
            return sum(p * value(c) for p, c in zip(node.chance_probs, node.children, strict=True))
        if node.player != player:
            dist = policy[node.infoset]
            return sum(
                dist.get(a, 0.0) * value(c)
                for a, c in zip(node.actions, node.children, strict=True)
                if dist.get(a, 0.0)
            )
        return value(node.children[best_action(node.infoset)])

    def best_action(key: str) -> int:
        if key not in choice:
            nodes = members[key]
            n_actions = len(nodes[0][0].actions)
            totals = [sum(w * value(n.children[i]) for n, w in nodes) for i in range(n_actions)]
            choice[key] = max(range(n_actions), key=totals.__getitem__)
        return choice[key]

    return value(root)


def _collect(
    node: Node,
    player: int,
    policy: Policy,
    reach: float,
    members: dict[str, list[tuple[Node, float]]],
) -> None:
    """Group ``player``'s decision nodes by information set, with chance × opponent reach."""
    if node.is_terminal:
        return
    if node.player == player:
        members[node.infoset].append((node, reach))
        for child in node.children:
            _collect(child, player, policy, reach, members)
        return
    if node.player == CHANCE:
        weights = node.chance_probs
    else:
        dist = policy[node.infoset]
        weights = tuple(dist.get(a, 0.0) for a in node.actions)
    for w, child in zip(weights, node.children, strict=True):
        _collect(child, player, policy, reach * w, members)


def nash_conv(root: Node, policy: Policy) -> float:
    """Σ over players of (best-response value − on-policy value)."""
    on_policy = expected_returns(root, policy)
    return sum(best_response_value(root, p, policy) - on_policy[p] for p in (0, 1))


def exploitability(root: Node, policy: Policy) -> float:
    """NashConv / 2: in a zero-sum game, the mean gain of a best responder over both seats."""
    return nash_conv(root, policy) / 2
