"""Training benchmarks: ``python benchmarks/training.py``.

1. Peak memory of chunked vs naive token log-probs (forward + backward into the hidden states,
   the output head frozen as under LoRA) at 512 positions for the embedded model's vocabulary
   (49,152) and a synthetic 262,144-entry head, each measured in a fresh subprocess (peak RSS
   above the inputs), side by side.
2. Seconds and generated tokens per SEPO step on the embedded model (Kuhn, 2 rollouts per
   opponent, 32 new tokens at most, no checkpoint evaluation).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

CHILD = """
import json, resource, sys, torch
from stratagem.training.logprobs import chunked_token_logprobs, naive_token_logprobs
mode, vocab = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
hidden = torch.randn(1, 512, 576, requires_grad=True)
weight = torch.randn(vocab, 576)  # the output head is frozen under LoRA
targets = torch.randint(0, vocab, (1, 512))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
fn = naive_token_logprobs if mode == "naive" else chunked_token_logprobs
fn(hidden, weight, targets).sum().backward()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"mib": (peak - before) / 1024}))
"""


def peak_mib(mode: str, vocab: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(vocab)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["mib"]


def sepo_step() -> dict:
    from pathlib import Path

    from stratagem.training.sepo import SEPOArgs, train_sepo

    logs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        train_sepo(
            SEPOArgs(
                game="kuhn",
                out=Path(tmp),
                steps=1,
                rollouts=2,
                max_new_tokens=32,
                eval_episodes=0,
                checkpoint_every=100,
            ),
            log=lambda line: logs.append(json.loads(line)),
        )
    return logs[-1]


def main() -> None:
    print("| vocabulary | naive peak MiB | chunked peak MiB | naive ÷ chunked |")
    print("| ---: | ---: | ---: | ---: |")
    for vocab in (49_152, 262_144):
        naive, chunked = peak_mib("naive", vocab), peak_mib("chunked", vocab)
        print(f"| {vocab:,} | {naive:.0f} | {chunked:.0f} | {naive / max(chunked, 1):.1f}× |")
    step = sepo_step()
    print(
        f"\nSEPO step on the embedded model (Kuhn, 2 rollouts × 5 opponents): "
        f"{step['seconds']:.1f} s, {step['samples']} decisions, {step['tokens']} generated "
        f"tokens trained, {step['tokens'] / step['seconds']:.1f} tokens/s"
    )


if __name__ == "__main__":
    main()
