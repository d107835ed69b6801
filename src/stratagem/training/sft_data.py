"""SFT datasets from rule-based demonstrators (SPEC §5; seed 000 §3.5, App. A, H).

Seeded simulators (default seed 42): each episode samples one demonstrator from the game's SFT
mixture and an opponent uniformly from the game's train, exploit and collusive pools (never the
robust pool, which is for evaluation only). The demonstrator's seat becomes **one multi-turn
chat** in the §4.1 format — system (the rules), then for each decision a user turn with what is
new and the demonstrator's answer (a short templated reason and the action on the last line) —
exactly the chat an LLM agent holds at the end of that episode (``Episode.chat``). Training puts
the loss on every assistant turn. Sizes are counted in decisions (App. H: 8,000 per game), so the
last episode of a game is cut after the decision that reaches the count.

Chats are written as JSONL ``messages`` rows (80/20 train/test, split by chat) that
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
from stratagem.games import get_game
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy, sft_mixture
from stratagem.training.reasons import reasons

# App. H sizes: decisions per game in each dataset
DATASETS: dict[str, dict[str, int]] = {
    "multi": {"ipd": 8000, "auction": 8000, "negotiation": 8000},
    "kuhn": {"kuhn": 8000},
    "multi_issue": {"multi_issue": 4000},
}
TEST_FRACTION = 0.2
TRAINING_POOLS = ("train", "exploit", "collusive")


@dataclass(frozen=True)
class Chat:
    """One demonstrator's chat of one episode: system, then user / assistant turns."""

    game: str
    strategy: str
    opponent: str
    actions: tuple[str, ...]  # the demonstrator's actions, one per assistant turn
    messages: list[dict[str, str]]

    @property
    def decisions(self) -> int:
        """The chat's assistant turns."""
        return len(self.actions)

    def row(self) -> dict:
        """The JSONL row: ``messages`` plus what the card counts."""
        return {
            "messages": self.messages,
            "game": self.game,
            "strategy": self.strategy,
            "opponent": self.opponent,
            "actions": list(self.actions),
        }


class _Demonstrator:
    """A rule-based strategy that also writes its reason into the decision text."""

    def __init__(self, game: str, name: str, rng: random.Random):
        self.strategy = get_strategy(game, name)
        self.name = name
        self.game = get_game(game)
        self.rng = rng

    def act(self, batch):
        decisions = self.strategy.act(batch)
        out = []
        for obs, d in zip(batch, decisions, strict=True):
            token = self.game.token(d.action)
            reason = self.rng.choice(reasons(self.game.name, self.name, obs.view, token))
            out.append(type(d)(d.action, text=f"{reason}\n{token}", probs=d.probs))
        return out


def game_chats(game_name: str, decisions: int, seed: int = 42) -> Iterator[Chat]:
    """Chats of one game holding ``decisions`` demonstrator decisions in all, deterministic in
    ``seed``: one chat per episode (the demonstrator sits in seat 0)."""
    game = get_game(game_name)
    mixture = sft_mixture(game_name)
    pools = get_pools(game_name)
    opponents = [n for pool, members in pools.items() if pool in TRAINING_POOLS for n in members]
    produced = 0
    index = 0
    while produced < decisions:
        rng = random.Random(derive(seed, "sft", game_name, index))
        name = rng.choices(list(mixture), weights=list(mixture.values()))[0]
        opponent = rng.choice(opponents)
        agents = (_Demonstrator(game_name, name, rng), get_strategy(game_name, opponent))
        episode = Episode(
            game, str(index), derive(seed, "sft-episode", game_name, index), (name, opponent)
        )
        rules, actions = None, []
        while not episode.done and produced < decisions:
            for obs in episode.waiting():
                decision = agents[obs.seat].act([obs])[0]
                if obs.seat == 0:
                    rules = rules or obs.rules
                    actions.append(game.token(decision.action))
                    produced += 1
                episode.submit(obs.seat, decision)
            if episode.ready:
                episode.step()
        if actions:
            turns = [m.to_dict() for m in episode.chat(0)][: 2 * len(actions)]
            messages = [{"role": "system", "content": rules or ""}, *turns]
            yield Chat(game_name, name, opponent, tuple(actions), messages)
        index += 1


def write_dataset(
    name: str,
    out: str | Path,
    seed: int = 42,
    sizes: dict[str, int] | None = None,
    on_example: Callable[[int], None] | None = None,
) -> dict:
    """Write ``out/<name>/{train,test}.jsonl`` and ``card.json``/``README.md``; returns the card.

    ``sizes`` are decisions per game; ``on_example(n)`` is told of every chat's n decisions.
    """
    sizes = sizes or DATASETS[name]
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    chats = []
    for game_name, count in sizes.items():
        for chat in game_chats(game_name, count, seed):
            chats.append(chat)
            if on_example:
                on_example(chat.decisions)
    random.Random(derive(seed, "sft-split", name)).shuffle(chats)
    # at least one test chat whenever there are two: the trainer evaluates on them
    n_test = max(round(len(chats) * TEST_FRACTION), 1 if len(chats) > 1 else 0)
    splits = {"test": chats[:n_test], "train": chats[n_test:]}
    for split_name, rows in splits.items():
        with open(folder / f"{split_name}.jsonl", "w", encoding="utf-8") as f:
            for chat in rows:
                f.write(json.dumps(chat.row(), ensure_ascii=False) + "\n")
    card = _card(name, seed, splits)
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (folder / "README.md").write_text(_card_markdown(card))
    return card


def _card(name: str, seed: int, splits: dict[str, list[Chat]]) -> dict:
    every = [c for rows in splits.values() for c in rows]
    answers = [m["content"] for c in every for m in c.messages if m["role"] == "assistant"]
    lengths = [len(a) for a in answers]

    def per(key) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for c in every:
            for label in key(c):
                counts[label] += 1
        return dict(sorted(counts.items()))

    return {
        "name": name,
        "seed": seed,
        "chats": {k: len(v) for k, v in splits.items()},
        "decisions": {k: sum(c.decisions for c in v) for k, v in splits.items()},
        "per_game": per(lambda c: [c.game] * c.decisions),
        "per_strategy": per(lambda c: [f"{c.game}/{c.strategy}"] * c.decisions),
        "per_opponent": per(lambda c: [f"{c.game}/{c.opponent}"] * c.decisions),
        "per_action": per(lambda c: [f"{c.game}/{a}" for a in c.actions]),
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
        "Rule-based demonstrations (stratagem `gen-sft`): one multi-turn chat in `messages` format",
        "per (episode, demonstrator seat); counts below are decisions (assistant turns).",
        "",
        f"- seed: {card['seed']}",
        f"- chats: {card['chats']['train']} train, {card['chats']['test']} test",
        f"- decisions: {card['decisions']['train']} train, {card['decisions']['test']} test",
        f"- assistant length (characters): median {card['assistant_chars']['median']}, "
        f"mean {card['assistant_chars']['mean']:.1f}, max {card['assistant_chars']['max']}",
    ]
    for title, key in (
        ("game / strategy", "per_strategy"),
        ("game / opponent", "per_opponent"),
        ("game / action", "per_action"),
    ):
        lines += ["", f"| {title} | decisions |", "| --- | ---: |"]
        lines += [f"| {k} | {v} |" for k, v in card[key].items()]
    return "\n".join(lines) + "\n"
