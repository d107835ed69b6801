"""Constrained choice scoring over a token trie (SPEC §4.3), shared by the hf and vllm backends.

A choice's probability is the product, over the branching points on its path through the trie
of every choice's tokens, of the softmax restricted to the children there; the products are
then normalised over the choices. Choices that share a first sub-token are so told apart at their
shortest distinguishing prefix. ``Trie.score`` reads full log-probability vectors (hf's masked
decode); ``trie_probs`` reads one log-probability per choice and position (vLLM's
``prompt_logprobs``). ``tests/scale/test_vllm.py`` checks both give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Trie:
    """The token trie of a set of choices: a node's children by token id."""

    children: dict[int, Trie]
    leaf: bool = False

    @classmethod
    def build(cls, sequences: Sequence[Sequence[int]]) -> Trie:
        """Returns the trie of ``sequences`` (one token-id sequence per choice)."""
        root = cls({})
        for seq in sequences:
            node = root
            for t in seq:
                node = node.children.setdefault(t, cls({}))
            node.leaf = True
        return root

    @property
    def branch_depth(self) -> int:
        """The deepest level (root = 0) at which the trie branches; -1 if it never does."""
        deepest = 0 if len(self.children) > 1 else -1
        for child in self.children.values():
            d = child.branch_depth
            if d >= 0:
                deepest = max(deepest, d + 1)
        return deepest

    @property
    def depth(self) -> int:
        """The length of the longest path from this node (0 for a leaf)."""
        return 1 + max((c.depth for c in self.children.values()), default=0) if self.children else 0

    def score(self, ids: Sequence[int], logps: Sequence[Any]) -> float:
        """Π over branching points on the path of softmax restricted to the children.

        Args:
            ids: One choice's token ids.
            logps: ``logps[pos]``: the (V,) log-probability tensor after the prompt and
                ``ids[:pos]``; needed at the branching points only.
        """
        import torch

        node, p = self, 1.0
        for pos, t in enumerate(ids):
            if len(node.children) > 1:
                kids = list(node.children)
                restricted = torch.softmax(logps[pos][kids], dim=-1)
                p *= float(restricted[kids.index(t)])
            node = node.children[t]
            if len(node.children) == 0:
                break
        return p


def trie_probs(
    token_ids: Sequence[Sequence[int]], logprob: Callable[[int, int], float]
) -> list[float]:
    """Returns each choice's probability when every other continuation is masked (SPEC §4.3).

    ``token_ids[j]`` are choice ``j``'s tokens; ``logprob(j, pos)`` is the model's log-probability
    of ``token_ids[j][pos]`` after the prompt and ``token_ids[j][:pos]``. At each branching point
    on a choice's path the probability is the softmax restricted to the children there; the
    product over its branching points, normalised over the choices, is the choice's probability.
    Naive equivalent: ``Trie.score`` on full logit vectors (``tests/scale`` compares them).
    """
    scores = []
    for ids in token_ids:
        p = 1.0
        for pos, token in enumerate(ids):
            prefix = tuple(ids[:pos])
            # the children at this node, each with a choice that passes through it
            children: dict[int, int] = {}
            for j, other in enumerate(token_ids):
                if len(other) > pos and tuple(other[:pos]) == prefix:
                    children.setdefault(other[pos], j)
            if len(children) > 1:
                logps = {t: logprob(j, pos) for t, j in children.items()}
                top = max(logps.values())
                total = sum(math.exp(v - top) for v in logps.values())
                p *= math.exp(logps[token] - top) / total
            if not any(
                len(other) > pos + 1 and tuple(other[: pos + 1]) == tuple(ids[: pos + 1])
                for other in token_ids
            ):
                break  # no choice continues past here: the rest cannot branch
        scores.append(p)
    total = sum(scores)
    return [s / total for s in scores]
