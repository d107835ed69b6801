"""The meta-game, oracle and first strategy PSRO starts from, for each kind of game.

- a text game (``ipd``, ...): cells simulated through ``stratagem.play``, the best of the
  candidate strategies as oracle;
- a solver tree (``kuhn``, ``leduc``) with ``oracle="exact"``: cells and best responses exact on
  the tree;
- a dialogue game (``meeting``, ``fruit``, ``debate``; seed 003): strategies are instruction
  strings, a cell is the dialogue trees in which each seat always uses its instruction, and the
  oracle picks the best of the candidate instructions plus ``propose`` new ones the LLM suggests.

``settings`` is the ``psro`` command's config (game, oracle, candidates, initial, episodes, seed,
propose and the dialogue options).
"""

from __future__ import annotations

from typing import Any

from stratagem.errors import ConfigError, did_you_mean


def psro_start(settings: Any) -> tuple[Any, Any, str]:
    """Returns ``(meta_game, oracle, first_strategy)`` for ``settings.game``."""
    from stratagem.games import game_names
    from stratagem.solvers.games import SOLVER_GAMES

    kind = SOLVER_GAMES.get(settings.game).kind if settings.game in SOLVER_GAMES else "text"
    if kind == "dialogue":
        return _dialogue(settings)
    if settings.oracle == "exact":
        from stratagem.solvers.psro import MetaGame, TreeGame

        if kind != "tree":
            trees = ", ".join(n for n, g in SOLVER_GAMES.items() if g.kind == "tree")
            raise ConfigError(f"game {settings.game!r} has no solver tree (solver games: {trees})")

        tree_game = TreeGame(SOLVER_GAMES.get(settings.game).game_tree())
        return MetaGame(tree_game.evaluate), tree_game, "uniform"
    if settings.game not in game_names():
        if settings.game in SOLVER_GAMES:
            raise ConfigError(
                f"{settings.game} is a solver game without strategies: use --oracle exact"
            )
        names = [*game_names(), *SOLVER_GAMES]
        raise ConfigError(f"unknown game {settings.game!r}{did_you_mean(settings.game, names)}")
    return _simulated(settings)


def disagreement_point(settings: Any) -> tuple[float, float] | None:
    """``settings.disagreement`` as nash-bargaining's point (None when unset); ``ConfigError``
    unless it is two payoffs given with ``--meta-solver nash-bargaining``."""
    point = settings.disagreement
    if point is None:
        return None
    if settings.meta_solver != "nash-bargaining" or len(point) != 2:
        raise ConfigError(
            "--disagreement takes two payoffs (seat 0, seat 1) and only with "
            f"--meta-solver nash-bargaining (got {point} with {settings.meta_solver})"
        )
    return float(point[0]), float(point[1])


def _dialogue(settings: Any) -> tuple[Any, Any, str]:
    from stratagem.games.dialogue import ANY
    from stratagem.solvers.dialogue import InstructionOracle, instruction_meta_game
    from stratagem.solvers.dialogue.setup import cached_backend, dialogue_setup
    from stratagem.solvers.psro import MetaGame

    if settings.oracle == "exact":
        raise ConfigError("dialogue games use the candidates oracle (no exact best response)")
    domain, scenarios, tree_args = dialogue_setup(
        settings, settings.game, settings.scenarios, baseline=False
    )
    initial = list(settings.initial or domain.instructions)
    candidates = settings.candidates or [*domain.definitions, ANY]
    for name in [*initial, *candidates]:
        domain.check_instruction(name)
    backend = cached_backend(settings)
    meta = MetaGame(instruction_meta_game(domain, scenarios, backend, **tree_args))
    for name in initial:
        meta.add(0, name)
        meta.add(1, name)
    oracle = InstructionOracle(
        list(candidates), domain, backend, propose=settings.propose, seed=settings.seed
    )
    return meta, oracle, initial[0]


def _simulated(settings: Any) -> tuple[Any, Any, str]:
    from stratagem.games import get_game
    from stratagem.solvers.psro import CandidateOracle, MetaGame, simulate
    from stratagem.strategies import get_strategy, strategies

    game = settings.game
    known = strategies(game).names()
    names = settings.candidates or list(known)
    for name in [*names, *(settings.initial or [])]:
        if name not in known:
            raise ConfigError(
                f"{game} has no strategy {name!r}{did_you_mean(name, known)}; "
                f"see `stratagem strategies --game {game}`"
            )
    evaluate = simulate(
        get_game(game, **settings.params),
        lambda name: get_strategy(game, name),
        episodes=settings.episodes,
        seed=settings.seed,
    )
    first = settings.initial[0] if settings.initial else names[0]
    return MetaGame(evaluate), CandidateOracle(tuple(names)), first
