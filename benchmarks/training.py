"""SEPO step benchmark on the embedded model: ``python benchmarks/training.py``.

One SEPO step (``own_episodes``, 2 rollouts per opponent, 32 new tokens at most) on IPD (8
rounds) and Kuhn (6 hands), in its two halves:

1. Rollouts, timed twice from the same start and seeds: keeping each seat's chat and its KV
   cache across rounds (the trainer's rollouts), and re-reading every prompt from scratch (the
   naive form).
2. The update (reference pass + one optimiser step) on *the same* rollouts, each configuration
   in a fresh subprocess (seconds: the median of ``--repeats`` updates; peak RSS above the
   loaded model, read from ``/proc/self/status`` after resetting the peak): packed episodes
   (each seat's episode one sequence) vs one sequence per decision; and, for the packed real
   step, log-probs from the final hidden states in chunks of 32 positions vs the model's full
   ``(T, V)`` logits.

The full step is rollouts + update; the table prints both forms and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

CHILD = """
import json, sys, time, torch
from dataclasses import asdict
from stratagem.training.sepo import trainer as sepo
from stratagem.training.logprobs import full_logits_sequence_logprobs, sequence_logprobs
from stratagem.training.packing import Turn, pack, per_decision
from stratagem.training.policy import load_policy
from stratagem.training.update import update
spec = json.loads(open(sys.argv[1]).read())
mode, logits, repeats = sys.argv[2], sys.argv[3], int(sys.argv[4])
args = sepo.SEPOArgs(**spec["args"]).resolved()
policy, _ = load_policy(args)
turns = [Turn(**t) for t in spec["turns"]]
sequences = pack(turns) if mode == "packed" else per_decision(turns)
params = [p for p in policy.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(params, lr=args.learning_rate)
fn = full_logits_sequence_logprobs if logits == "full" else sequence_logprobs
def rss(field):  # MiB, from /proc: VmRSS now, VmHWM the peak since the last reset
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
open("/proc/self/clear_refs", "w").write("5")  # reset the peak: model loading is not counted
before = rss("VmRSS:")
seconds = []
for _ in range(repeats):
    start = time.perf_counter()
    update(policy, optimizer, params, sequences, args, logprobs=fn)
    seconds.append(time.perf_counter() - start)
print(json.dumps({"seconds": seconds, "mib": rss("VmHWM:") - before,
                  "tokens": sum(len(s.ids) for s in sequences), "sequences": len(sequences)}))
"""


def rollouts(game: str, adapter: str | None, n: int, max_new_tokens: int, reuse: bool):
    """One step's rollouts from the starting policy; returns (args, turns, seconds)."""
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend
    from stratagem.games import get_game
    from stratagem.training.policy import load_policy
    from stratagem.training.sepo import trainer as sepo

    args = sepo.SEPOArgs(
        game=game, adapter=adapter, rollouts=n, max_new_tokens=max_new_tokens, out=Path("unused")
    ).resolved()
    policy, tokenizer = load_policy(args)
    policy.eval()
    backend = HFBackend.from_model(policy, tokenizer, "bench", prefix_reuse=reuse)
    agent = LLMAgent(
        backend, get_game(game), Sampling(args.temperature, 1.0, max_new_tokens), fallback="sample"
    )
    start = time.perf_counter()
    traces = sepo.rollout(agent, args, step=0)
    seconds = time.perf_counter() - start
    game_ = get_game(game)
    turns = sepo.turns_from(sepo.step_groups(traces, game_, args), game_, args)
    return args, turns, seconds


def update(spec_file: Path, mode: str, logits: str, repeats: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(spec_file), mode, logits, str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="ipd,kuhn")
    parser.add_argument("--adapter", default=None, help="start from this (SFT) adapter")
    parser.add_argument("--rollouts", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the results here")
    opts = parser.parse_args()
    results = {}
    for game in opts.games.split(","):
        args, turns, kept = rollouts(game, opts.adapter, opts.rollouts, opts.max_new_tokens, True)
        _, _, reread = rollouts(game, opts.adapter, opts.rollouts, opts.max_new_tokens, False)
        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp) / "spec.json"
            arguments = {**asdict(args), "out": str(args.out)}
            spec.write_text(json.dumps({"args": arguments, "turns": [asdict(t) for t in turns]}))
            packed = update(spec, "packed", "chunked", opts.repeats)
            single = update(spec, "per_decision", "chunked", opts.repeats)
            full = update(spec, "packed", "full", opts.repeats)
        results[game] = {
            "decisions": len(turns),
            "rollout_kv_kept_s": kept,
            "rollout_reread_s": reread,
            "packed": packed,
            "per_decision": single,
            "packed_full_logits": full,
        }
        print(f"{game}: {json.dumps(results[game])}", file=sys.stderr)
    med = statistics.median
    print(
        "| game | decisions | rollouts: KV kept / re-read (s) | update: packed / per decision (s) "
        "| tokens read: packed / per decision | step: packed / per decision (s) | speed-up |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for game, r in results.items():
        up, us = med(r["packed"]["seconds"]), med(r["per_decision"]["seconds"])
        new, old = r["rollout_kv_kept_s"] + up, r["rollout_reread_s"] + us
        print(
            f"| {game} | {r['decisions']} | {r['rollout_kv_kept_s']:.0f} / "
            f"{r['rollout_reread_s']:.0f} | {up:.1f} / {us:.1f} | {r['packed']['tokens']:,} / "
            f"{r['per_decision']['tokens']:,} | {new:.0f} / {old:.0f} | {old / new:.1f}× |"
        )
    print()
    print(
        "| game | update peak MiB: packed / per decision | real step peak MiB: chunked (32) "
        "/ full (T, V) logits | full ÷ chunked |"
    )
    print("| --- | ---: | ---: | ---: |")
    for game, r in results.items():
        chunked, full = r["packed"]["mib"], r["packed_full_logits"]["mib"]
        print(
            f"| {game} | {chunked:.0f} / {r['per_decision']['mib']:.0f} | {chunked:.0f} / "
            f"{full:.0f} | {full / max(chunked, 1):.1f}× |"
        )
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
