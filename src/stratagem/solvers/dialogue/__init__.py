"""LLM-expanded dialogue trees (seed 003 §2–3; SPEC §9): the solver tree of a dialogue game.

- ``tree``: ``DialogueTree``, one scenario's extensive-form game, expanded lazily a depth at a
  time, and its ``DialogueNode``s (the ``Node`` protocol, so CFR, best response and PSRO run on
  it unchanged);
- ``judge``: payoffs from the LLM judge (one batched call, then a constrained fallback);
- ``expansion``: ``expand``, breadth first over many trees at once, and ``ExpansionStats``;
- ``instructions``: PSRO over instruction strings (``instruction_payoffs``, ``InstructionOracle``);
- ``live``: live dialogues, one sampled game at a time, with a seat steered by a policy (the
  imitation MLP, or ``CFRSteer``), and the elected-steered meta-game played from them.

Every model call goes through ``backends.cache.CachedBackend``, a persistent cache keyed by
(model id, chat, sampling, seed), whose first answer is the message from then on, so a rerun, a
second solver or a PSRO cell that shares a prefix costs no model call and sees the same text. On a
local model the batch a message is written in can still change it (measured on the embedded
SmolLM2: the same chat and seed alone or in a batch of three differed in 1 of 3 rows, sampled or
greedy; the batch shape changes the logits in their last bits, and a token can follow).

Departures from OpenSpiel's ``chat_games``: a judge answer that does not parse is a recorded
failure (or a recorded constrained fallback), never a payoff of 0; the tree is expanded breadth
first in batches instead of one message per ``apply_action``; messages are cached on disk.
"""

from stratagem.solvers.dialogue.expansion import (
    ExpansionStats,
    UnsolvedScenarios,
    check_solvable,
    expand,
    failed_scenarios,
    stats,
)
from stratagem.solvers.dialogue.instructions import (
    InstructionOracle,
    fixed_policy,
    instruction_meta_game,
    instruction_payoffs,
)
from stratagem.solvers.dialogue.judge import (
    JUDGE_SAMPLING,
    GenerationFailure,
    JudgeFailure,
    Outcome,
)
from stratagem.solvers.dialogue.tree import (
    DEFAULT_SAMPLING,
    Branch,
    DialogueNode,
    DialogueTree,
    Step,
    judge_pending,
)

__all__ = [
    "DEFAULT_SAMPLING",
    "JUDGE_SAMPLING",
    "Branch",
    "DialogueNode",
    "DialogueTree",
    "ExpansionStats",
    "GenerationFailure",
    "InstructionOracle",
    "JudgeFailure",
    "Outcome",
    "Step",
    "UnsolvedScenarios",
    "check_solvable",
    "expand",
    "failed_scenarios",
    "fixed_policy",
    "instruction_meta_game",
    "instruction_payoffs",
    "judge_pending",
    "stats",
]
