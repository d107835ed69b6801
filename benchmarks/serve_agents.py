"""Which opponent can play on the page: ``python benchmarks/serve_agents.py [--games 4]``.

Plays Deal or No Deal and bargaining games through the play page's own server side
(``PlayService``: the model worker, its per-turn deadline, the retry) with a rule-based stand-in
for the person (FairSplit in Deal or No Deal, Linear in bargaining, its turns submitted in the
person's seat), for each candidate opponent: the embedded SmolLM2 (``hf``) and rule-based
strategies. Prints per opponent: games, how they ended (by the rules, or aborted after the
model's faulty answers, or a model turn past the deadline), agreements, the model's faulty
answers per game and the seconds a person waits per model turn (median and max).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from stratagem.agent import Decision
from stratagem.agents.settings import LLMSettings
from stratagem.agents.spec import make_agent
from stratagem.games import get_game
from stratagem.strategies import get_strategy
from stratagem.web.service import Limits, PlayService
from stratagem.web.storage import GameStore

CANDIDATES = {
    "dond": ("hf", "strategy:FairSplit", "strategy:Cooperative"),
    "bargaining": ("hf", "strategy:Boulware", "strategy:TitForTatConcession"),
}
PERSON = {"dond": "FairSplit", "bargaining": "Linear"}


def play(
    service: PlayService, person_name: str, game: str, seat: int, verbose: bool = False
) -> dict:
    """One game: the stand-in moves in ``seat`` whenever it is its turn; a failed model turn
    (error or deadline) ends the game as the person would leave it. ``verbose`` prints each
    wait for the model."""
    person = get_strategy(game, person_name)
    human = service.new_game(None, "bench", seat)
    waits: list[float] = []
    asked = time.monotonic()
    while True:
        with human.lock:
            thinking, failure, done = human.thinking, human.failure, human.done
            obs = None if done or thinking else human.waiting(human.human_seat)
        if done:
            break
        if failure is not None:
            service.close(human, "abandoned")
            return {"end": "model unavailable: " + failure, "waits": waits}
        if obs is None:
            time.sleep(0.02)
            continue
        if asked is not None:
            waits.append(time.monotonic() - asked)
            if verbose:
                faults = sum(1 for d in human.episode.decisions if d.seat != seat and d.attempt > 0)
                print(
                    f"  model turn: {waits[-1]:.1f} s, faulty answers so far {faults}", flush=True
                )
        [decision] = person.act([obs])
        with human.lock:
            human.episode.submit(human.human_seat, Decision(decision.action, decision.text))
            ask = human.advance()
        asked = time.monotonic() if ask else None
        if ask:
            service.worker.request(human)
    info = human.episode.rounds[-1].info
    model = human.model_seat
    faults = sum(1 for d in human.episode.decisions if d.seat == model and d.attempt > 0)
    end = info["end"] if game == "dond" else ("deal" if info["deal"] else info["end_reason"])
    return {"end": end, "faults": faults, "waits": waits}


def main() -> None:
    """Plays ``--games`` games per opponent and game; prints one line per opponent."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=120.0, help="the page's model deadline")
    parser.add_argument("--only", default=None, help="one game id")
    parser.add_argument("--agents", default=None, help="comma-separated specs (default: all)")
    parser.add_argument("--verbose", action="store_true", help="print each model turn's wait")
    args = parser.parse_args()
    for game_id, specs in CANDIDATES.items():
        if args.only and game_id != args.only:
            continue
        game = get_game(game_id)
        for spec in args.agents.split(",") if args.agents else specs:
            options = LLMSettings().llm_options(game)
            agent = make_agent(spec, game, options if spec == "hf" else None)
            with tempfile.TemporaryDirectory() as tmp:
                store = GameStore(Path(tmp) / "games.db")
                service = PlayService(
                    game, agent, spec, store, b"k" * 32, Limits(model_timeout=args.timeout)
                )
                start = time.monotonic()
                results = [
                    play(service, PERSON[game_id], game_id, i % 2, args.verbose)
                    for i in range(args.games)
                ]
                seconds = time.monotonic() - start
                service.shutdown()
                store.close()
            ends = [r["end"] for r in results]
            waits = [w for r in results for w in r["waits"]]
            faults = [r.get("faults", 0) for r in results]
            print(
                f"{game_id:10} {spec:30} games {len(results)}  ends {dict(_count(ends))}  "
                f"faulty answers/game {statistics.mean(faults):.1f}  "
                f"wait/model turn median {statistics.median(waits or [0]):.1f} s "
                f"max {max(waits or [0]):.1f} s  ({seconds:.0f} s)",
                flush=True,
            )


def _count(values: list[str]) -> list[tuple[str, int]]:
    return sorted({v: values.count(v) for v in values}.items())


if __name__ == "__main__":
    main()
