"""Intra-op threads of a training update on a busy CPU: ``python benchmarks/threads.py``.

One LoRA forward + backward (the trainers' chunked log-probs) over a 730-token sequence of the
embedded model — the size of one packed Kuhn episode — timed with torch using 1 thread and with
all cores, first on an idle machine and then while ``--busy`` other processes spin on the CPU
(what a machine shared with other jobs looks like). Each configuration runs in a fresh
subprocess; the table prints the median of ``--repeats`` passes after one warm-up pass, and the
ratio of the two thread settings side by side under the same load.

Why it matters: OpenMP's worker threads synchronise at every operator; when another process
holds a core, every operator waits for the descheduled thread, so "all cores" can be several
times slower than one thread. Run the trainers with ``OMP_NUM_THREADS=1`` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from stratagem.backends.embedded import embedded_dir
from stratagem.training.logprobs import sequence_logprobs
model = AutoModelForCausalLM.from_pretrained(str(embedded_dir()), dtype=torch.float32)
lora = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
model = get_peft_model(model, lora)
ids, positions = list(range(100, 830)), list(range(650, 730))
seconds = []
for _ in range(int(sys.argv[2]) + 1):
    start = time.perf_counter()
    sequence_logprobs(model, ids, positions).sum().backward()
    seconds.append(time.perf_counter() - start)
print(json.dumps(seconds[1:]))
"""


def _spin() -> None:
    while True:
        pass


def measure(threads: int, repeats: int) -> float:
    """Median seconds of one forward + backward with ``threads`` torch threads."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(threads), str(repeats)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return statistics.median(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="spinning processes for the load")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"{cores} cores; one LoRA forward + backward over 730 tokens (median of {args.repeats})")
    print(f"| load | 1 thread (s) | {cores} threads (s) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for busy in (0, args.busy):
        spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
        for p in spinners:
            p.start()
        try:
            one, all_ = measure(1, args.repeats), measure(cores, args.repeats)
        finally:
            for p in spinners:
                p.terminate()
        load = "idle" if busy == 0 else f"{busy} spinning processes"
        print(f"| {load} | {one:.1f} | {all_:.1f} | {all_ / one:.2f} |")


if __name__ == "__main__":
    main()
