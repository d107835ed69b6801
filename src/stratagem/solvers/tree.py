"""An immutable extensive-form game tree for solvers (two players, chance, imperfect information).

A node is a chance node (``player == CHANCE``), a decision node of player 0 or 1 with an
information-set key, or a terminal node with returns for both players. Policies are mappings
``infoset -> {action: probability}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

CHANCE = -1
TERMINAL = -2
Policy = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True, slots=True)
class Node:
    player: int  # 0, 1, CHANCE or TERMINAL
    actions: tuple[str, ...] = ()
    children: tuple[Node, ...] = ()
    infoset: str | None = None
    chance_probs: tuple[float, ...] = ()
    returns: tuple[float, float] = (0.0, 0.0)

    @classmethod
    def terminal(cls, returns: tuple[float, float]) -> Node:
        return cls(TERMINAL, returns=returns)

    @classmethod
    def chance(
        cls, outcomes: tuple[str, ...], children: tuple[Node, ...], probs: tuple[float, ...]
    ) -> Node:
        return cls(CHANCE, outcomes, children, chance_probs=probs)

    @classmethod
    def decision(
        cls, player: int, infoset: str, actions: tuple[str, ...], children: tuple[Node, ...]
    ) -> Node:
        return cls(player, actions, children, infoset=infoset)

    @property
    def is_terminal(self) -> bool:
        return self.player == TERMINAL


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, depth first."""
    yield node
    for child in node.children:
        yield from walk(child)


def infosets(root: Node) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Infoset -> (player, legal actions) for every decision node."""
    return {n.infoset: (n.player, n.actions) for n in walk(root) if n.infoset is not None}


def uniform_policy(root: Node) -> dict[str, dict[str, float]]:
    return {key: {a: 1 / len(acts) for a in acts} for key, (_, acts) in infosets(root).items()}


def expected_returns(node: Node, policy: Policy) -> tuple[float, float]:
    """The expected returns of both players when both follow ``policy``."""
    if node.is_terminal:
        return node.returns
    if node.player == CHANCE:
        weights = node.chance_probs
    else:
        dist = policy[node.infoset]
        weights = tuple(dist.get(a, 0.0) for a in node.actions)
    v0 = v1 = 0.0
    for w, child in zip(weights, node.children, strict=True):
        if w:
            c0, c1 = expected_returns(child, policy)
            v0 += w * c0
            v1 += w * c1
    return v0, v1
