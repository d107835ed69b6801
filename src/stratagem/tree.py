"""The game tree: a ``Node`` protocol for two-player extensive-form games (SPEC §9, DESIGN §2).

A node is a chance node (``player == CHANCE``), a decision node of player 0 or 1 with an
information-set key, or a terminal node with returns for both players. Solvers only call the
protocol's methods, so an eager table (``EagerNode``: Kuhn, Leduc) and a lazily expanded tree
(an LLM dialogue, whose children are generated on first ``child`` call) are solved alike.

This is the vocabulary games and solvers share: games build their trees from it and never import
``solvers/``. Policies are mappings ``infoset -> {action: probability}``; the solver-side parts
(expected returns, the flat array layout) live in ``solvers.tree``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

CHANCE = -1
TERMINAL = -2
Policy = Mapping[str, Mapping[str, float]]


@runtime_checkable
class Node(Protocol):
    """One history of a two-player game with chance and imperfect information (perfect recall).

    ``player`` is 0 or 1 at a decision node, ``CHANCE`` at a chance node, ``TERMINAL`` at the end.
    """

    @property
    def player(self) -> int:
        """0 or 1 at a decision node, ``CHANCE`` or ``TERMINAL`` (read-only, so frozen nodes
        satisfy the protocol)."""
        ...

    def actions(self) -> tuple[str, ...]:
        """Returns the legal actions at a decision node, the outcomes at a chance node, or ()
        when the node is terminal. Every node of one information set has the same actions."""
        ...

    def child(self, action: str) -> Node:
        """Returns the node reached by playing ``action`` (or by chance drawing it); raises
        ``KeyError`` when ``action`` is not in ``actions()``."""
        ...

    def chances(self) -> tuple[float, ...]:
        """Returns the probability of each outcome, aligned with ``actions()``, at a chance node,
        or () when the node is a decision or terminal node."""
        ...

    def infoset(self) -> str:
        """Returns the information-set key of the player to act at a decision node, or "" when
        the node is a chance or terminal node."""
        ...

    def returns(self) -> tuple[float, float]:
        """Returns (player 0's, player 1's) payoff at a terminal node, or (0.0, 0.0) when the
        node is not terminal."""
        ...


@dataclass(frozen=True, slots=True)
class EagerNode:
    """A ``Node`` held in memory with all its children: trees built from rule tables."""

    player: int  # 0, 1, CHANCE or TERMINAL
    labels: tuple[str, ...] = ()  # legal actions, or chance outcomes
    children: tuple[EagerNode, ...] = ()
    key: str = ""  # information-set key of a decision node
    probs: tuple[float, ...] = ()  # chance probabilities
    payoffs: tuple[float, float] = (0.0, 0.0)

    @classmethod
    def terminal(cls, payoffs: tuple[float, float]) -> EagerNode:
        """A terminal node paying ``payoffs`` to players 0 and 1."""
        return cls(TERMINAL, payoffs=payoffs)

    @classmethod
    def chance(
        cls, outcomes: tuple[str, ...], children: tuple[EagerNode, ...], probs: tuple[float, ...]
    ) -> EagerNode:
        """A chance node drawing ``outcomes[i]`` (leading to ``children[i]``) with ``probs[i]``."""
        if not (len(outcomes) == len(children) == len(probs)) or abs(sum(probs) - 1) > 1e-12:
            raise ValueError("chance node: outcomes, children and probabilities must align")
        return cls(CHANCE, outcomes, children, probs=probs)

    @classmethod
    def decision(
        cls, player: int, infoset: str, actions: tuple[str, ...], children: tuple[EagerNode, ...]
    ) -> EagerNode:
        """A decision node of ``player`` in information set ``infoset``."""
        if len(actions) != len(children) or not actions:
            raise ValueError("decision node: actions and children must align and be non-empty")
        return cls(player, actions, children, key=infoset)

    def actions(self) -> tuple[str, ...]:
        """Returns the legal actions, the chance outcomes, or () when the node is terminal."""
        return self.labels

    def child(self, action: str) -> EagerNode:
        """Returns the node after ``action``; raises ``KeyError`` for an action not listed."""
        try:
            return self.children[self.labels.index(action)]
        except ValueError:
            raise KeyError(action) from None

    def chances(self) -> tuple[float, ...]:
        """Returns the outcome probabilities at a chance node, or () elsewhere."""
        return self.probs

    def infoset(self) -> str:
        """Returns the information-set key at a decision node, or "" elsewhere."""
        return self.key

    def returns(self) -> tuple[float, float]:
        """Returns both players' payoffs at a terminal node, or (0.0, 0.0) elsewhere."""
        return self.payoffs


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, depth first (a lazy tree is expanded in full)."""
    yield node
    for action in node.actions():
        yield from walk(node.child(action))


def infosets(root: Node) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Infoset -> (player, legal actions), for every decision node of the tree."""
    return {n.infoset(): (n.player, n.actions()) for n in walk(root) if n.player in (0, 1)}


def uniform_policy(root: Node) -> dict[str, dict[str, float]]:
    """The policy that plays every legal action with equal probability."""
    return {key: {a: 1 / len(acts) for a in acts} for key, (_, acts) in infosets(root).items()}
