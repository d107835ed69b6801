"""Rollout engines side by side on the embedded SmolLM2: ``python benchmarks/rollout_engines.py``.

The trainer's rollout backend on the CPU, ``hf`` (the policy in transformers, per-seat KV reuse)
against ``llamacpp`` (llama.cpp serving the same policy converted to an unquantised f32 GGUF, the
LoRA applied), both built on one policy in this process, each at every ``--threads`` count:

1. Rollouts: ``--batches`` concurrent IPD episodes (8 rounds, TitForTat opposite) played by the
   policy sampling at SEPO's temperature (0.8, at most ``--max-new-tokens`` tokens, stopping at
   the action), the configurations alternating ``--repeats`` times on the same episode seeds:
   decisions/s and generated tokens/s (medians), and the speed-up over hf at torch's default
   thread count (today's rollouts).
2. One SEPO step (``--step-game``, own_episodes, evaluation off) per ``--steps`` configuration
   (engine@threads), each in a fresh process: the step's rollout, update and total seconds from
   its log line (model loading and the engine's one-off GGUF conversion are not in the step;
   the conversion is printed apart), and the rollout-time log-probs' largest deviation from the
   trainer's.

The machine's load average is printed before and after: on a shared machine the ratios measured
side by side are the numbers to read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = """
import json, sys
from pathlib import Path
from stratagem.training.sepo.trainer import SEPOArgs, train_sepo
settings = json.loads(sys.argv[1])
logs = []
train_sepo(SEPOArgs(**{**settings, "out": Path(settings["out"])}), log=logs.append)
print(json.dumps([json.loads(x) for x in logs if x.startswith("{") and "rollout_seconds" in x]))
"""


def engines(args: argparse.Namespace, folder: Path):
    """The policy, and the two backends on it (and the GGUF conversion's seconds)."""
    from stratagem.backends.hf import HFBackend
    from stratagem.training.engines.llamacpp import TrainerLlamaCppBackend
    from stratagem.training.policy import load_policy
    from stratagem.training.sepo.trainer import SEPOArgs

    policy, tokenizer = load_policy(SEPOArgs(adapter=args.adapter, out=folder))
    policy.eval()
    hf = HFBackend.from_model(policy, tokenizer, "hf", prefix_reuse=True)
    start = time.perf_counter()
    cpp = TrainerLlamaCppBackend(policy, tokenizer, folder, model_id="llamacpp", dtype=args.dtype)
    return {"hf": hf, "llamacpp": cpp}, time.perf_counter() - start


def rollout(backend, n: int, max_new_tokens: int, seed: int) -> tuple[float, int, int, float]:
    """n IPD episodes played at once; returns (seconds, decisions, generated tokens, CPU
    seconds of this process)."""
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.games import get_game
    from stratagem.play import EpisodeSpec, play
    from stratagem.strategies import get_strategy

    backend.reset_prefix_cache()
    game = get_game("ipd")
    agent = LLMAgent(backend, game, Sampling(0.8, 1.0, max_new_tokens), fallback="sample")
    opponent = get_strategy("ipd", "TitForTat")
    specs = [EpisodeSpec(str(i), seed + i, (agent, opponent), {"seat": 0}) for i in range(n)]
    start, cpu = time.perf_counter(), time.process_time()
    traces = list(play(game, specs, max_live=n))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    decisions = [d for t in traces for d in t.decisions if d.seat == 0]
    return seconds, len(decisions), sum(d.tokens for d in decisions), cpu


def sepo_step(engine: str, threads: int, args: argparse.Namespace, folder: Path) -> dict:
    settings = {
        "game": args.step_game,
        "adapter": args.adapter,
        "steps": 1,
        "rollouts": args.step_rollouts,
        "max_new_tokens": args.max_new_tokens,
        "eval_episodes": 0,
        "rollout_engine": engine,
        "threads": threads,
        "out": str(folder),
    }
    out = subprocess.run(
        [sys.executable, "-c", STEP, json.dumps(settings)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])[0]


def use_threads(backend, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    if hasattr(backend, "engine"):
        backend.engine.set_threads(threads)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,16,64", help="concurrent episodes ('' skips)")
    parser.add_argument("--threads", default="1,2", help="CPU thread counts to compare")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--adapter", default=None, help="start from this (SFT) adapter")
    parser.add_argument("--dtype", default="f32", help="the GGUF's weights: f32, f16, bf16")
    parser.add_argument("--step-game", default="ipd", help="the SEPO step's game")
    parser.add_argument("--step-rollouts", type=int, default=2)
    parser.add_argument(
        "--steps",
        default="hf@0,hf@1,llamacpp@1",
        help="SEPO step configurations, engine@threads (0: torch's default); '' skips",
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    opts = parser.parse_args()
    default_threads = torch.get_num_threads()
    thread_counts = [int(t) for t in opts.threads.split(",")]
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"rollout engines · {default_threads} threads by default · load average {load}")
    results: dict = {"load_start": os.getloadavg(), "rollouts": {}, "steps": {}}
    configs = [(name, t) for t in thread_counts for name in ("hf", "llamacpp")]
    with tempfile.TemporaryDirectory() as tmp:
        backends, convert = engines(opts, Path(tmp))
        results["gguf_conversion_s"] = convert
        for n in (int(b) for b in opts.batches.split(",") if b):
            runs: dict[str, list] = {f"{e}@{t}": [] for e, t in configs}
            for r in range(opts.repeats):
                for name, t in configs if r % 2 == 0 else configs[::-1]:
                    use_threads(backends[name], t)
                    key = f"{name}@{t}"
                    runs[key].append(rollout(backends[name], n, opts.max_new_tokens, 1000 * r))
                    print(f"batch {n} {key}: {runs[key][-1]}", file=sys.stderr, flush=True)
            results["rollouts"][n] = runs
        del backends
        torch.set_num_threads(default_threads)
        for config in filter(None, opts.steps.split(",")):
            name, threads = config.split("@")
            entry = sepo_step(name, int(threads), opts, Path(tmp) / f"step-{name}-{threads}")
            results["steps"][config] = entry
            print(f"SEPO step {config}: {entry['seconds']:.0f} s", file=sys.stderr, flush=True)
    results["load_end"] = os.getloadavg()
    report(results, opts, default_threads, convert)
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=1))


def report(results: dict, opts: argparse.Namespace, default_threads: int, convert: float) -> None:
    med = statistics.median
    print(
        f"\nIPD rollouts, SEPO's sampling (T 0.8, ≤ {opts.max_new_tokens} new tokens, stop at "
        f"the action), medians of {opts.repeats}; GGUF {opts.dtype}, converted once in "
        f"{convert:.1f} s; CPU/wall: cores this process kept busy"
    )
    print(
        "\n| concurrent episodes | engine @ threads | decisions/s | tokens/s | CPU/wall "
        "| speed-up |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n, runs in results["rollouts"].items():
        rate = {k: med(r[1] / r[0] for r in v) for k, v in runs.items()}
        tokens = {k: med(r[2] / r[0] for r in v) for k, v in runs.items()}
        busy = {k: med(r[3] / r[0] for r in v) for k, v in runs.items()}
        base_key = f"hf@{default_threads}" if f"hf@{default_threads}" in runs else next(iter(runs))
        for key in runs:
            print(
                f"| {n} | {key} | {rate[key]:.2f} | {tokens[key]:.1f} | {busy[key]:.2f} "
                f"| {rate[key] / rate[base_key]:.1f}× vs {base_key} |"
            )
    if results["steps"]:
        print(
            f"\nOne SEPO step ({opts.step_game}, {opts.step_rollouts} rollouts per opponent, "
            f"≤ {opts.max_new_tokens} new tokens, evaluation off), engine @ threads (0: torch's "
            f"default, {default_threads})"
        )
        print(
            "\n| engine @ threads | decisions | rollouts (s) | update (s) | step (s) "
            "| max Δ log π (rollout vs trainer) | speed-up |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        first = next(iter(results["steps"].values()))["seconds"]
        for config, e in results["steps"].items():
            rolled, step = e["rollout_seconds"], e["seconds"]
            print(
                f"| {config} | {e['samples']} | {rolled:.0f} | {step - rolled:.0f} | {step:.0f} "
                f"| {e['rollout_logprob_max_dev']:.3f} | {first / step:.1f}× |"
            )
    print(f"\nload average at the end {'/'.join(f'{x:.1f}' for x in results['load_end'])}")


if __name__ == "__main__":
    main()
