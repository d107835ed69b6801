"""SFT datasets from rule-based demonstrators (SPEC §5; seed 000 §3.5, App. A, H).

Seeded simulators (default seed 42): each episode samples one demonstrator from the game's SFT
mixture and an opponent uniformly from the game's train, exploit and collusive pools (never the
robust pool, which is for evaluation only); every decision of the demonstrator becomes one chat
example — the seat's chat exactly as an LLM agent sees it at that decision (``chat_for``:
system = rules, then the earlier user turns and the demonstrator's own earlier answers, then what
is new) and the assistant answer: a short templated reason and the action on the last line.
Examples are written as JSONL ``messages`` rows (80/20 train/test) that
``datasets.load_dataset("json", ...)`` and TRL read directly, with a dataset card of counts and
lengths.
"""

from __future__ import annotations

import json
import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from stratagem.episode import Episode
from stratagem.game import chat_for
from stratagem.games import get_game
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy, sft_mixture
from stratagem.training.reasons import reasons

# App. H sizes: examples per game in each dataset
DATASETS: dict[str, dict[str, int]] = {
    "multi": {"ipd": 8000, "auction": 8000, "negotiation": 8000},
    "kuhn": {"kuhn": 8000},
    "multi_issue": {"multi_issue": 4000},
}
TEST_FRACTION = 0.2


TRAINING_POOLS = ("train", "exploit", "collusive")


@dataclass(frozen=True)
class Example:
    """One decision of a demonstrator: its chat up to the answer, and the answer."""

    game: str
    strategy: str
    action: str
    messages: list[dict[str, str]]


class _Demonstrator:
    """A rule-based strategy that also writes its reason into the decision text."""

    def __init__(self, game: str, name: str, rng: random.Random):
        self.strategy = get_strategy(game, name)
        self.name = name
        self.game = game
        self.rng = rng

    def act(self, batch):
        decisions = self.strategy.act(batch)
        out = []
        for obs, d in zip(batch, decisions, strict=True):
            token = get_game(self.game).token(d.action)
            reason = self.rng.choice(reasons(self.game, self.name, obs.view, token))
            out.append(type(d)(d.action, text=f"{reason}\n{token}", probs=d.probs))
        return out


def game_examples(game_name: str, count: int, seed: int = 42) -> Iterator[Example]:
    """Returns ``count`` examples of one game, deterministic in ``seed``."""
    game = get_game(game_name)
    mixture = sft_mixture(game_name)
    pools = get_pools(game_name)
    opponents = [n for pool, members in pools.items() if pool in TRAINING_POOLS for n in members]
    produced = 0
    index = 0
    while produced < count:
        rng = random.Random(derive(seed, "sft", game_name, index))
        name = rng.choices(list(mixture), weights=list(mixture.values()))[0]
        agents = (
            _Demonstrator(game_name, name, rng),
            get_strategy(game_name, rng.choice(opponents)),
        )
        episode = Episode(
            game, str(index), derive(seed, "sft-episode", game_name, index), (name, "opponent")
        )
        while not episode.done and produced < count:
            for obs in episode.waiting():
                decision = agents[obs.seat].act([obs])[0]
                if obs.seat == 0:
                    answer = {"role": "assistant", "content": decision.text}
                    token = game.token(decision.action)
                    yield Example(game_name, name, token, [*chat_for(obs), answer])
                    produced += 1
                episode.submit(obs.seat, decision)
            episode.step()
        index += 1


def write_dataset(
    name: str,
    out: str | Path,
    seed: int = 42,
    sizes: dict[str, int] | None = None,
    on_example: Callable[[], None] | None = None,
) -> dict:
    """Write ``out/<name>/{train,test}.jsonl`` and ``card.json``/``README.md``; returns the card."""
    sizes = sizes or DATASETS[name]
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    examples = []
    for game_name, count in sizes.items():
        for ex in game_examples(game_name, count, seed):
            examples.append(ex)
            if on_example:
                on_example()
    random.Random(derive(seed, "sft-split", name)).shuffle(examples)
    n_test = round(len(examples) * TEST_FRACTION)
    splits = {"test": examples[:n_test], "train": examples[n_test:]}
    for split_name, rows in splits.items():
        with open(folder / f"{split_name}.jsonl", "w", encoding="utf-8") as f:
            for ex in rows:
                f.write(
                    json.dumps(
                        {
                            "messages": ex.messages,
                            "game": ex.game,
                            "strategy": ex.strategy,
                            "action": ex.action,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    card = _card(name, seed, splits)
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (folder / "README.md").write_text(_card_markdown(card))
    return card


def _card(name: str, seed: int, splits: dict[str, list[Example]]) -> dict:
    every = [ex for rows in splits.values() for ex in rows]
    lengths = [len(ex.messages[-1]["content"]) for ex in every]
    return {
        "name": name,
        "seed": seed,
        "examples": {k: len(v) for k, v in splits.items()},
        "per_game": dict(Counter(ex.game for ex in every)),
        "per_strategy": {
            f"{g}/{s}": n
            for (g, s), n in sorted(Counter((ex.game, ex.strategy) for ex in every).items())
        },
        "per_action": {
            f"{g}/{a}": n
            for (g, a), n in sorted(Counter((ex.game, ex.action) for ex in every).items())
        },
        "assistant_chars": {
            "median": statistics.median(lengths),
            "mean": statistics.fmean(lengths),
            "max": max(lengths),
        },
    }


def _card_markdown(card: dict) -> str:
    lines = [
        f"# SFT dataset `{card['name']}`",
        "",
        "Rule-based demonstrations in chat `messages` format (stratagem `gen-sft`).",
        "",
        f"- seed: {card['seed']}",
        f"- examples: {card['examples']['train']} train, {card['examples']['test']} test",
        f"- assistant length (characters): median {card['assistant_chars']['median']}, "
        f"mean {card['assistant_chars']['mean']:.1f}, max {card['assistant_chars']['max']}",
        "",
        "| game / strategy | examples |",
        "| --- | ---: |",
    ]
    lines += [f"| {k} | {v} |" for k, v in card["per_strategy"].items()]
    lines += ["", "| game / action | examples |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in card["per_action"].items()]
    return "\n".join(lines) + "\n"
