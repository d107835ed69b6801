"""Regenerate the golden traces: ``python tests/golden/regenerate.py`` (or ``make golden``).

A golden file changes only when rules, prompts, seeding or strategies change; review the diff.
"""

from __future__ import annotations

from pathlib import Path

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
    """The rules and the first prompts of both seats, as a readable text file."""
    game = get_game(name)
    state = game.new_episode(derive(SEED, name, 0))
    parts = [f"# {name} v{game.version}: system prompt\n", state.observe(state.to_act()[0]).rules]
    agent = get_strategy(name, get_pools(name).train[0])
    for _ in range(2):
        for seat in state.to_act():
            parts += [
                f"\n\n# seat {seat}, round {state.observe(seat).round}\n",
                state.observe(seat).prompt,
            ]
        state.apply({s: agent.act([state.observe(s)])[0].action for s in state.to_act()})
    return "".join(parts) + "\n"


def main() -> None:
    for name in GAMES:
        (HERE / f"{name}.jsonl").write_text(render(name))
        (HERE / f"{name}.prompts.txt").write_text(prompts(name))
        print(f"wrote tests/golden/{name}.jsonl and {name}.prompts.txt")


if __name__ == "__main__":
    main()
