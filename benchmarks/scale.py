"""Scale-out benchmarks: local play vs Ray with 1 and 2 workers: ``python benchmarks/scale.py``.

1. A rule-based bargaining round robin (5 strategies, both roles, 400 GFT + 200 NGFT scenarios:
   15,000 negotiations; ``--gft``/``--ngft`` change them) written to a run folder, tables
   included.
2. A SEPO evaluation of the embedded SmolLM2 on Kuhn poker (3 episodes per opponent, 21
   episodes, greedy, 32 new tokens), written to a run folder; each Ray worker loads the model
   once, inside the timed run.

One local Ray cluster of 2 CPUs is started first (its start time is printed apart: a run with
``--ray`` pays it once) and every Ray run reuses it; its workers run at the driver's niceness,
as those of the cluster ``--ray`` starts do. Each configuration runs ``--repeats`` times,
interleaved, and the median is reported with the ratio to local and the overhead per episode,
(Ray time - local time) / episodes. Ray workers run torch on one thread each (Ray sets
``OMP_NUM_THREADS`` to the worker's one CPU); the local run uses every core unless
``--local-threads`` says otherwise. The load average is printed: on a shared machine other jobs
change every number, and OpenMP threads of the local run suffer most from oversubscription.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stratagem.cluster import WORKER_NICENESS
from stratagem.evaluation.pools import count_episodes, evaluate
from stratagem.games import get_game
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin
from stratagem.tournament.ray import RayPlayer

AGENTS = ("Boulware", "Linear", "Conceder", "TitForTatConcession", "NaiveAccepter")


def bargaining_run(gft: int, ngft: int) -> tuple[Callable, int, dict]:
    game = get_game("bargaining")
    scenarios = game.tournament_scenarios(gft, ngft, 42)
    agents = {n: get_strategy("bargaining", n) for n in AGENTS}

    def run(out: Path, player) -> None:
        round_robin(game, agents, out, count=len(scenarios), scenarios=scenarios, player=player)

    return run, len(agents) ** 2 * len(scenarios), {}


def model_eval_run(episodes: int) -> tuple[Callable, int, dict]:
    from stratagem.agents.spec import LLMOptions, make_agent

    game = get_game("kuhn")
    options = LLMOptions(max_new_tokens=32)
    agent = make_agent("hf", game, options)  # the driver's copy: metrics (exact exploitability)

    def run(out: Path, player) -> None:
        evaluate(game, agent, episodes=episodes, out=out, player=player)

    return run, count_episodes(game, episodes), {"agents": {agent.name: "hf"}, "options": options}


def measure(name: str, run: Callable, episodes: int, kwargs: dict, repeats: int) -> list[str]:
    players = {
        "local": lambda: None,
        "ray, 1 worker": lambda: RayPlayer(workers=1, **kwargs),
        "ray, 2 workers": lambda: RayPlayer(workers=2, **kwargs),
    }
    times: dict[str, list[float]] = {k: [] for k in players}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for label, make in players.items():
                out = Path(tmp) / f"{label}-{r}".replace(" ", "").replace(",", "")
                start = time.perf_counter()
                run(out, make())
                times[label].append(time.perf_counter() - start)
                print(f"  {name} · {label} · {times[label][-1]:.2f} s", file=sys.stderr)
    local = statistics.median(times["local"])
    rows = []
    for label, xs in times.items():
        t = statistics.median(xs)
        overhead = (t - local) / episodes * 1000
        rows.append(
            f"| {name} | {label} | {episodes:,} | {t:.2f} | {local / t:.2f}× | "
            + ("—" if label == "local" else f"{overhead:+.2f} ms")
            + " |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument("--gft", type=int, default=400, help="bargaining GFT scenarios")
    parser.add_argument("--ngft", type=int, default=200, help="bargaining NGFT scenarios")
    parser.add_argument("--skip-model", action="store_true", help="rule-based only")
    parser.add_argument("--model-episodes", type=int, default=3, help="Kuhn episodes/opponent")
    parser.add_argument(
        "--local-threads", type=int, default=None, help="torch threads of the local run [all]"
    )
    args = parser.parse_args()
    import os

    import ray

    if args.local_threads:
        import torch

        torch.set_num_threads(args.local_threads)  # Ray workers run one thread each
    begin = time.perf_counter()
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")

    start = time.perf_counter()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="WARNING",
        _system_config={"worker_niceness": WORKER_NICENESS},  # as RayPlayer's local cluster
    )
    print(f"local Ray cluster (2 CPUs) started in {time.perf_counter() - start:.1f} s")
    print(
        "\n| run | player | episodes | seconds (median) | speed vs local | overhead / episode |"
        "\n| --- | --- | ---: | ---: | ---: | ---: |"
    )
    run, n, kwargs = bargaining_run(*((40, 20) if args.quick else (args.gft, args.ngft)))
    for row in measure("bargaining round robin", run, n, kwargs, args.repeats):
        print(row, flush=True)
    if not args.skip_model:
        run, n, kwargs = model_eval_run(1 if args.quick else args.model_episodes)
        for row in measure("embedded-model Kuhn eval", run, n, kwargs, args.repeats):
            print(row, flush=True)
    ray.shutdown()
    print(
        f"load average at end: {os.getloadavg()[0]:.1f}; {time.perf_counter() - begin:.0f} s in all"
    )


if __name__ == "__main__":
    main()
