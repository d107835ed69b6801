"""Raw forward speed of the embedded SmolLM2, torch vs llama.cpp: ``python benchmarks/forward.py``.

Why the llama.cpp rollout engine is not faster on this CPU: the same work — ``--rows`` prompts
of ``--prompt`` random tokens prefilled in one batch, then ``--steps`` one-token decode steps of
every row — timed in a fresh process per configuration at ``--threads`` CPU threads, the
configurations alternating ``--repeats`` times (medians):

- torch: transformers in float32 and bfloat16, one batched forward, then its KV cache;
- llama.cpp: the model converted to an f32 and a bf16 GGUF (``training.engines.gguf``), with
  the engine's *unified* KV cache (every row's cells in one pool, what ``LlamaCppEngine``
  uses so rows can share a prefix) and with one KV stream per row.

The machine's load average is printed: on a shared machine, read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TORCH = """
import json, sys, time, torch
from transformers import AutoModelForCausalLM
from stratagem.backends.embedded import embedded_dir
dtype, rows, prompt, steps, threads = sys.argv[1], *map(int, sys.argv[2:6])
torch.set_num_threads(threads)
model = AutoModelForCausalLM.from_pretrained(embedded_dir(), dtype=getattr(torch, dtype)).eval()
gen = torch.Generator().manual_seed(0)
ids = torch.randint(100, 40000, (rows, prompt), generator=gen)
with torch.no_grad():
    start = time.perf_counter()
    out = model(ids, use_cache=True)
    prefilled = time.perf_counter()
    cache = out.past_key_values
    for _ in range(steps):
        nxt = torch.randint(100, 40000, (rows, 1), generator=gen)
        cache = model(nxt, past_key_values=cache, use_cache=True).past_key_values
    done = time.perf_counter()
print(json.dumps([prefilled - start, done - prefilled]))
"""

LLAMA = """
import json, sys, time
import numpy as np
from stratagem.backends.llamacpp.engine import _lib
path, unified = sys.argv[1], sys.argv[2] == "1"
rows, prompt, steps, threads = map(int, sys.argv[3:7])
lib = _lib()
model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
params = lib.llama_context_default_params()
per_row = prompt + steps + 64
params.n_ctx = per_row * rows
params.n_batch, params.n_ubatch, params.n_seq_max = 2048, 512, rows
params.n_threads = params.n_threads_batch = threads
params.kv_unified, params.no_perf = unified, True
ctx = lib.llama_init_from_model(model, params)
batch = lib.llama_batch_init(2048, 0, 1)
rng = np.random.default_rng(0)
def decode(items):
    for at in range(0, len(items), 2048):
        chunk = items[at : at + 2048]
        batch.n_tokens = len(chunk)
        for i, (token, pos, seq, wanted) in enumerate(chunk):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
            batch.seq_id[i][0], batch.logits[i] = seq, wanted
        assert lib.llama_decode(ctx, batch) == 0
tokens = rng.integers(100, 40000, (rows, prompt))
start = time.perf_counter()
decode([(int(tokens[s, p]), p, s, p == prompt - 1) for s in range(rows) for p in range(prompt)])
prefilled = time.perf_counter()
for k in range(steps):
    decode([(int(rng.integers(100, 40000)), prompt + k, s, True) for s in range(rows)])
done = time.perf_counter()
print(json.dumps([prefilled - start, done - prefilled]))
"""


def convert(folder: Path) -> dict[str, Path]:
    """The embedded model as f32 and bf16 GGUF files in ``folder``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stratagem.backends.embedded import embedded_dir
    from stratagem.training.engines.gguf import write_model_gguf

    model = AutoModelForCausalLM.from_pretrained(embedded_dir())
    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    return {
        dtype: write_model_gguf(
            model.state_dict(), model.config, tokenizer, folder / f"{dtype}.gguf", dtype=dtype
        )
        for dtype in ("f32", "bf16")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=300)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    sizes = [str(v) for v in (opts.rows, opts.prompt, opts.steps, opts.threads)]
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        ggufs = convert(Path(tmp))
        configs = {
            "torch float32": [TORCH, "float32"],
            "torch bfloat16": [TORCH, "bfloat16"],
            "llama.cpp f32, unified KV": [LLAMA, str(ggufs["f32"]), "1"],
            "llama.cpp f32, a KV stream per row": [LLAMA, str(ggufs["f32"]), "0"],
            "llama.cpp bf16, a KV stream per row": [LLAMA, str(ggufs["bf16"]), "0"],
        }
        runs: dict[str, list[list[float]]] = {name: [] for name in configs}
        for r in range(opts.repeats):
            for name in list(configs) if r % 2 == 0 else list(configs)[::-1]:
                code, *args = configs[name]
                out = subprocess.run(
                    [sys.executable, "-c", code, *args, *sizes],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "OMP_NUM_THREADS": str(opts.threads)},
                )
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"{name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    med = statistics.median
    print(
        f"\n{opts.rows} rows × {opts.prompt} prompt tokens, then {opts.steps} decode steps; "
        f"{opts.threads} thread(s); medians of {opts.repeats}; load average at the end "
        f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    print(
        "| engine | prefill tokens/s | decode tokens/s | prefill vs torch f32 "
        "| decode vs torch f32 |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    prefill = {k: opts.rows * opts.prompt / med(r[0] for r in v) for k, v in runs.items()}
    decode = {k: opts.rows * opts.steps / med(r[1] for r in v) for k, v in runs.items()}
    base = "torch float32"
    for name in configs:
        print(
            f"| {name} | {prefill[name]:.0f} | {decode[name]:.1f} "
            f"| {prefill[name] / prefill[base]:.2f}× | {decode[name] / decode[base]:.2f}× |"
        )


if __name__ == "__main__":
    main()
