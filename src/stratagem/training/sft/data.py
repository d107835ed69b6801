"""SFT datasets from rule-based demonstrators (SPEC §5; seed 000 §3.5, App. A, H).

Seeded simulators (default seed 42): each episode samples one demonstrator from the game's SFT
mixture and an opponent uniformly from the game's train, exploit and collusive pools (never the
robust pool, which is for evaluation only). The demonstrator's seat becomes **one multi-turn
chat** in the §4.1 format — system (the rules), then for each decision a user turn with what is
new and the demonstrator's answer (a short templated reason and the action on the last line) —
exactly the chat an LLM agent holds at the end of that episode (``Episode.chat``). Training puts
the loss on every assistant turn. Sizes are counted in decisions (App. H: 8,000 per game), so the
last episode of a game is cut after the decision that reaches the count.

``simulated_chats`` does the same for any game and any agents (rule-based, ``hf``, ``openai``):
the dialogue games' warm starts (``gen-sft --game dond --agents ...``), where every seat of every
episode is a demonstration unless told otherwise.

Chats are written as JSONL ``messages`` rows (80/20 train/test, split by chat) that
``datasets.load_dataset("json", ...)`` and TRL read directly, with a dataset card of counts and
lengths. With ``turns=True`` each chat is decomposed instead into one sample per assistant turn
(seed 004 §5.2, App. B.1): the prompt is the system turn and every turn before it, the completion
is the turn itself, in TRL's conversational ``prompt``/``completion`` format (loss on the
completion only). ``<think>`` blocks are stripped from the earlier answers in a prompt and kept in
the completion, as seed 004 does: the model conditions on the observable part of its earlier
answers (reasoning models' chat templates drop earlier reasoning the same way) and still learns to
reason in the turn it is trained on. Whole chats keep every answer whole: each is a target.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stratagem.episode import Episode
from stratagem.errors import ConfigError
from stratagem.game import Game, HasHeldOutScenarios
from stratagem.games import get_game
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy, sft_mixture
from stratagem.trace import Trace
from stratagem.training.sft.args import GenSFTArgs  # noqa: F401 (its former home)
from stratagem.training.sft.reasons import reasons

if TYPE_CHECKING:
    from stratagem.agent import Agent

# App. H sizes: decisions per game in each dataset
DATASETS: dict[str, dict[str, int]] = {
    "multi": {"ipd": 8000, "auction": 8000, "negotiation": 8000},
    "kuhn": {"kuhn": 8000},
    "multi_issue": {"multi_issue": 4000},
}
TEST_FRACTION = 0.2
TRAINING_POOLS = ("train", "exploit", "collusive")
_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)  # an unclosed block runs to the end


def strip_think(text: str) -> str:
    """Returns ``text`` without its ``<think>…</think>`` blocks (an unclosed one runs to the
    end), surrounding whitespace trimmed; text without one is returned unchanged."""
    stripped = _THINK.sub("", text)
    return text if stripped == text else stripped.strip()


@dataclass(frozen=True)
class Chat:
    """One demonstrator's chat of one episode: system, then user / assistant turns."""

    game: str
    strategy: str
    opponent: str
    actions: tuple[str, ...]  # the demonstrator's actions, one per assistant turn
    messages: list[dict[str, str]]
    score: float | None = None  # the seat's episode payoff, when the chat comes from a trace
    agreement: bool | None = None  # whether the episode ended in an agreement, when recorded
    aborted: bool | None = None  # whether the rules aborted the episode (no loss on the chat)

    @property
    def decisions(self) -> int:
        """The chat's assistant turns."""
        return len(self.actions)

    def outcome(self) -> dict:
        """``score`` and ``agreement``, those that are known (rows carry them)."""
        known = {"score": self.score, "agreement": self.agreement, "aborted": self.aborted}
        return {k: v for k, v in known.items() if v is not None}

    def row(self) -> dict:
        """The JSONL row: ``messages`` plus what the card counts (and the outcome, if known)."""
        return {
            "messages": self.messages,
            "game": self.game,
            "strategy": self.strategy,
            "opponent": self.opponent,
            "actions": list(self.actions),
            **self.outcome(),
        }

    def turn_rows(self) -> list[dict]:
        """One row per assistant turn k: ``prompt`` = the system turn and every turn before k,
        earlier answers with ``<think>`` stripped; ``completion`` = answer k, whole; ``action``
        = the action it played; ``turn`` = k (0-based)."""
        rows: list[dict] = []
        context: list[dict[str, str]] = []
        for message in self.messages:
            if message["role"] != "assistant":
                context.append(dict(message))
                continue
            k = len(rows)
            rows.append(
                {
                    "prompt": [dict(m) for m in context],
                    "completion": [dict(message)],
                    "game": self.game,
                    "strategy": self.strategy,
                    "opponent": self.opponent,
                    "action": self.actions[k],
                    "turn": k,
                    **self.outcome(),
                }
            )
            context.append({"role": "assistant", "content": strip_think(message["content"])})
        return rows


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


def _label(token: str) -> str:
    """An action as the card counts it: free-text turns by their first 24 characters."""
    return token if len(token) <= 24 else token[:24] + "…"


def agreement_of(trace: Trace) -> bool | None:
    """Whether the episode ended in an agreement, as its last round records it (``agreement``,
    or ``deal`` for trades); None when the game records neither."""
    if not trace.rounds:
        return None
    info = trace.rounds[-1].info or {}
    for key in ("agreement", "deal"):
        if isinstance(info.get(key), bool):
            return info[key]
    return None


def demonstration_filter(
    agreements_only: bool = False, min_score: float | None = None
) -> Callable[[Trace, int], bool] | None:
    """The ``keep(trace, seat)`` of ``simulated_chats`` that keeps a seat's chat only when its
    episode ended in an agreement (``agreements_only``) and the seat scored at least
    ``min_score``; None (keep every chat) when neither is asked.

    The returned filter raises ``ConfigError`` on a trace whose game records no agreement when
    ``agreements_only`` is set.
    """
    if not agreements_only and min_score is None:
        return None

    def keep(trace: Trace, seat: int) -> bool:
        if agreements_only:
            agreed = agreement_of(trace)
            if agreed is None:
                raise ConfigError(f"{trace.game} records no agreement: drop --agreements-only")
            if not agreed:
                return False
        return min_score is None or trace.totals()[seat] >= min_score

    return keep


def simulated_chats(
    game_name: str,
    agents: Sequence[str],
    episodes: int,
    seed: int = 42,
    *,
    params: Mapping[str, Any] | None = None,
    demonstrators: Sequence[str] | None = None,
    options: Any = None,
    keep: Callable[[Trace, int], bool] | None = None,
    self_pairs: bool = False,
) -> Iterator[Chat]:
    """Chats from ``episodes`` episodes per ordered pair of ``agents`` (agent specs as ``eval``
    takes them: strategy names, ``hf``, ``openai:MODEL``), each pair in both seats, played
    together (an LLM agent answers a whole tick in one batch); deterministic in ``seed`` for
    rule-based agents.

    Every seat whose agent is in ``demonstrators`` (default: all) becomes one chat: the rules
    it was shown, then its user / assistant turns as it held them (corrections included).
    ``keep(trace, seat)`` filters them (e.g. ``demonstration_filter``: agreements, a minimum
    score); episodes that failed are skipped. ``self_pairs``: each agent also plays itself (a
    single agent always does). A game that holds scenarios out for evaluation
    (``HasHeldOutScenarios``: DoND) is played on the training side of the split ``seed`` makes.
    Each chat records its seat's score and, where the game records
    it, whether the episode agreed. ``options`` are the ``LLMOptions`` of LLM agents.
    """
    from stratagem.agents.spec import make_agent

    game = get_game(game_name, **dict(params or {}))
    specs = [a if ":" in a or a == "hf" else f"strategy:{a}" for a in agents]
    built = [make_agent(spec, game, options) for spec in specs]
    wanted = set(demonstrators) if demonstrators is not None else set(agents)
    plays = _pair_specs(game, game_name, agents, built, episodes, seed, self_pairs)
    finished: dict[str, Episode] = {}
    for trace in play(game, plays, on_episode=lambda e: finished.__setitem__(e.episode_id, e)):
        episode = finished.pop(trace.episode_id)
        if trace.status != "complete":
            continue
        names = trace.meta["names"]
        for seat in (0, 1):
            if names[seat] not in wanted or (keep is not None and not keep(trace, seat)):
                continue
            chat = _seat_chat(game_name, trace, episode, seat)
            if chat is not None:
                yield chat


def _pair_specs(
    game: Game,
    game_name: str,
    agents: Sequence[str],
    built: Sequence[Agent],
    episodes: int,
    seed: int,
    self_pairs: bool,
) -> list[EpisodeSpec]:
    """The episodes of ``simulated_chats``: ``episodes`` per ordered pair of ``agents`` (each
    with itself too under ``self_pairs`` or when it is the only one), ``built`` their agents,
    seeded from ``seed`` by the pair and episode number, and on the training side of a game's
    held-out split."""
    plays = []
    for i, a in enumerate(agents):
        for j, b in enumerate(agents):
            if i != j or self_pairs or len(agents) == 1:
                for k in range(episodes):
                    eid = f"{a}-{b}-{k}"
                    episode_seed = derive(seed, "sft-sim", game_name, eid)
                    scenario = None
                    if isinstance(game, HasHeldOutScenarios):
                        scenario = game.training_scenario(seed, episode_seed)
                    plays.append(
                        EpisodeSpec(
                            eid, episode_seed, (built[i], built[j]), {"names": (a, b)}, scenario
                        )
                    )
    return plays


def _seat_chat(game_name: str, trace: Trace, episode: Episode, seat: int) -> Chat | None:
    """The chat ``seat`` held in the finished ``episode`` (``trace``), refused answers marked;
    None when it holds no turn."""
    names = trace.meta["names"]
    turns = mark_refused([m.to_dict() for m in episode.chat(seat)], trace, seat)
    if not turns:
        return None
    actions = tuple(d.action for d in trace.decisions if d.seat == seat)
    messages = [{"role": "system", "content": episode.rules(seat) or ""}, *turns]
    return Chat(
        game_name,
        names[seat],
        names[1 - seat],
        actions,
        messages,
        score=trace.totals()[seat],
        agreement=agreement_of(trace),
        aborted=bool(trace.rounds and trace.rounds[-1].info.get("aborted")) or None,
    )


def mark_refused(turns: list[dict], trace: Trace, seat: int) -> list[dict]:
    """``turns`` (the seat's chat after the system turn) with ``"refused": true`` on each
    assistant answer the game refused: one the seat answered again (its next decision is a
    retry, ``attempt`` > 0) and the answer that made the rules abort the game. ``train sft``
    carries no loss on them (SPEC §7)."""
    decisions = [d for d in trace.decisions if d.seat == seat]
    aborted_by = trace.rounds[-1].info.get("aborted_by") if trace.rounds else None
    refused = [later.attempt > 0 for later in decisions[1:]] + [aborted_by == seat]
    answers = [m for m in turns if m["role"] == "assistant"]
    for message, was_refused in zip(answers, refused, strict=False):
        if was_refused:
            message["refused"] = True
    return turns


def write_chats(
    name: str,
    chats: Iterable[Chat],
    out: str | Path,
    seed: int = 42,
    on_example=None,
    *,
    turns: bool = False,
) -> dict:
    """Write ``chats`` as ``out/<name>/{train,test}.jsonl`` (80/20 by chat) with ``card.json``
    and ``README.md``; returns the card. ``turns``: one prompt/completion row per assistant turn
    (``Chat.turn_rows``) instead of one ``messages`` row per chat; the split stays by chat, so
    no episode has turns on both sides."""
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    collected = []
    for chat in chats:  # streamed: the progress bar moves as episodes finish
        collected.append(chat)
        if on_example:
            on_example(chat.decisions)
    chats = collected
    if not chats:
        raise ConfigError(f"no chats to write for {name}: every episode failed or was filtered")
    random.Random(derive(seed, "sft-split", name)).shuffle(chats)
    # at least one test chat whenever there are two: the trainer evaluates on them
    n_test = max(round(len(chats) * TEST_FRACTION), 1 if len(chats) > 1 else 0)
    splits = {"test": chats[:n_test], "train": chats[n_test:]}
    for split_name, rows in splits.items():
        with open(folder / f"{split_name}.jsonl", "w", encoding="utf-8") as f:
            for chat in rows:
                for row in chat.turn_rows() if turns else [chat.row()]:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    card = _card(name, seed, splits, turns)
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (folder / "README.md").write_text(_card_markdown(card))
    return card


def write_dataset(
    name: str,
    out: str | Path,
    seed: int = 42,
    sizes: dict[str, int] | None = None,
    on_example: Callable[[int], None] | None = None,
    *,
    turns: bool = False,
) -> dict:
    """Write ``out/<name>/{train,test}.jsonl`` and ``card.json``/``README.md``; returns the card.

    ``sizes`` are decisions per game; ``on_example(n)`` is told of every chat's n decisions;
    ``turns`` as in ``write_chats``.
    """
    sizes = sizes or DATASETS[name]
    chats = (
        chat for game_name, count in sizes.items() for chat in game_chats(game_name, count, seed)
    )
    return write_chats(name, chats, out, seed, on_example, turns=turns)


def _card(name: str, seed: int, splits: dict[str, list[Chat]], turns: bool = False) -> dict:
    every = [c for rows in splits.values() for c in rows]
    answers = [m["content"] for c in every for m in c.messages if m["role"] == "assistant"]
    lengths = [len(a) for a in answers]

    def per(key) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for c in every:
            for label in key(c):
                counts[label] += 1
        return dict(sorted(counts.items()))

    card = {
        "name": name,
        "seed": seed,
        "layout": "turns" if turns else "chats",
        "chats": {k: len(v) for k, v in splits.items()},
        "decisions": {k: sum(c.decisions for c in v) for k, v in splits.items()},
        "per_game": per(lambda c: [c.game] * c.decisions),
        "per_strategy": per(lambda c: [f"{c.game}/{c.strategy}"] * c.decisions),
        "per_opponent": per(lambda c: [f"{c.game}/{c.opponent}"] * c.decisions),
        "per_action": per(lambda c: [f"{c.game}/{_label(a)}" for a in c.actions]),
        "assistant_chars": {
            "median": statistics.median(lengths),
            "mean": statistics.fmean(lengths),
            "max": max(lengths),
        },
    }
    scores = [c.score for c in every if c.score is not None]
    agreed = [c.agreement for c in every if c.agreement is not None]
    if scores:  # chats from traces: what a filter on outcomes would see
        card["outcomes"] = {
            "mean_score": statistics.fmean(scores),
            "zero_score_share": sum(x == 0 for x in scores) / len(scores),
            "agreement_share": sum(agreed) / len(agreed) if agreed else None,
        }
    return card


def _card_markdown(card: dict) -> str:
    layout = (
        [
            "Demonstrations (stratagem `gen-sft --turns`): one row per assistant turn in",
            "`prompt`/`completion` format (the prompt holds the earlier turns, `<think>`",
            "stripped), split by (episode, demonstrator seat); counts below are decisions (rows).",
        ]
        if card.get("layout") == "turns"
        else [
            "Demonstrations (stratagem `gen-sft`): one multi-turn chat in `messages` format",
            "per (episode, demonstrator seat); counts below are decisions (assistant turns).",
        ]
    )
    lines = [
        f"# SFT dataset `{card['name']}`",
        "",
        *layout,
        "",
        f"- seed: {card['seed']}",
        f"- chats: {card['chats']['train']} train, {card['chats']['test']} test",
        f"- decisions: {card['decisions']['train']} train, {card['decisions']['test']} test",
        f"- assistant length (characters): median {card['assistant_chars']['median']}, "
        f"mean {card['assistant_chars']['mean']:.1f}, max {card['assistant_chars']['max']}",
    ]
    outcomes = card.get("outcomes")
    if outcomes:
        agreed = outcomes["agreement_share"]
        lines.append(
            f"- outcomes: mean score {outcomes['mean_score']:.2f}, "
            f"{outcomes['zero_score_share']:.0%} of chats scored 0"
            + ("" if agreed is None else f", {agreed:.0%} from agreements")
        )
    for title, key in (
        ("game / strategy", "per_strategy"),
        ("game / opponent", "per_opponent"),
        ("game / action", "per_action"),
    ):
        lines += ["", f"| {title} | decisions |", "| --- | ---: |"]
        lines += [f"| {k} | {v} |" for k, v in card[key].items()]
    return "\n".join(lines) + "\n"
