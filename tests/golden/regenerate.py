"""Regenerate the golden traces: ``python tests/golden/regenerate.py [GAME ...]`` (or
``make golden``).

A golden file changes only when rules, prompts, seeding or strategies change; review the diff.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stratagem.episode import Episode
from stratagem.games import GAMES, get_game
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy, strategies
from stratagem.trace import Trace

HERE = Path(__file__).parent
SEED = 42


def golden_traces(name: str) -> list[Trace]:
    """Three episodes: train vs exploit, a random strategy vs train, and a robust self-pairing."""
    pools = get_pools(name)
    names = strategies(name).names()
    random_name = next((n for n in names if n.startswith("Random")), pools.train[-1])
    pairs = [
        (pools.train[0], pools.exploit[0]),
        (random_name, pools.train[-1]),
        (pools.robust[-1], pools.robust[-1]),
    ]
    specs = [
        EpisodeSpec(
            f"{a}/{b}/{i}", derive(SEED, name, i), (get_strategy(name, a), get_strategy(name, b))
        )
        for i, (a, b) in enumerate(pairs)
    ]
    return list(play(get_game(name), specs))


def render(name: str) -> str:
    # decisions keep the prompt so a prompt change shows in the diff
    return "".join(t.to_json() + "\n" for t in golden_traces(name))


def prompts(name: str) -> str:
    """The system prompt and each seat's chat over the first steps, as a readable text file."""
    game = get_game(name)
    episode = Episode(game, "golden", derive(SEED, name, 0), ("a", "b"))
    agent = get_strategy(name, get_pools(name).train[0])
    first = episode.waiting()[0]
    parts = [f"# {name} v{game.version}: system prompt of seat {first.seat}\n", first.rules]
    for _ in range(3):
        for obs in episode.waiting():
            parts += [f"\n\n# seat {obs.seat}, round {obs.round}: user\n", obs.prompt]
            decision = agent.act([obs])[0]
            episode.submit(obs.seat, decision)
            parts += [f"\n# seat {obs.seat}: assistant\n", episode.chat(obs.seat)[-1].content]
        episode.step()
    return "".join(parts) + "\n"


def main(names: list[str]) -> None:
    for name in names or GAMES:
        (HERE / f"{name}.jsonl").write_text(render(name))
        (HERE / f"{name}.prompts.txt").write_text(prompts(name))
        print(f"wrote tests/golden/{name}.jsonl and {name}.prompts.txt")


if __name__ == "__main__":
    main(sys.argv[1:])
