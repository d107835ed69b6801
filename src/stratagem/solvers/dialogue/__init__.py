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

from __future__ import annotations

from stratagem.lazy import lazy_names

_EXPORTS = {
    "ExpansionStats": "expansion",
    "UnsolvedScenarios": "expansion",
    "check_solvable": "expansion",
    "expand": "expansion",
    "failed_scenarios": "expansion",
    "stats": "expansion",
    "InstructionOracle": "instructions",
    "fixed_policy": "instructions",
    "instruction_meta_game": "instructions",
    "instruction_payoffs": "instructions",
    "JUDGE_SAMPLING": "judge",
    "GenerationFailure": "judge",
    "JudgeFailure": "judge",
    "Outcome": "judge",
    "DEFAULT_SAMPLING": "tree",
    "Branch": "tree",
    "DialogueNode": "tree",
    "DialogueTree": "tree",
    "Step": "tree",
    "judge_pending": "tree",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_names(__name__, _EXPORTS)
