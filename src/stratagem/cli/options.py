"""Command-line options generated from settings dataclasses (``stratagem.settings``).

Every command is one settings dataclass and a function taking it (verifiers builds each
environment's CLI from one config object the same way). ``register`` turns the dataclass into a
typer command with one ``--field-name`` option per field, help from the field's docstring, plus
``--config FILE`` (YAML or TOML, any field); flags win over the file, the file over the defaults.
Shared groups live with their concept (``agents.settings.LLMSettings``, ``settings.RaySettings``,
``solvers.dialogue_setup.DialogueSettings``); the two below are the command line's own.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from stratagem.settings import (
    CLI_TYPES,
    build,
    choices_of,
    choose,
    default_of,
    field_docs,
    kind_of,
    opt,
)

C = TypeVar("C")


@dataclasses.dataclass(kw_only=True)
class GameGroup:
    """The game a command plays."""

    game: str = opt(..., "-g")
    """Game id (see `stratagem games`)."""
    params: dict[str, Any] = opt({}, "--param", "-p")
    """Game parameter KEY=VALUE (JSON value); repeatable."""


@dataclasses.dataclass(kw_only=True)
class RunGroup:
    """The seed and run folder of a command that writes one."""

    seed: int = opt(0, "-s")
    """Base seed: every episode's and decision's seed derives from it."""
    out: str | None = opt(None, "-o")
    """Run folder [under runs/, named by the command's settings, e.g. runs/solve-kuhn-cfr+,
    runs/ipd/<agent>-s0-n20 for eval]; rerunning the same command resumes it."""

    def run_folder(self, default: Path) -> Path:
        """Returns ``out`` (checked: an empty or file path is refused) or ``default``."""
        from stratagem.runs import check_out_path

        return check_out_path(default if self.out is None else self.out)


_MARKUP = re.compile(r"``(.+?)``|`(.+?)`")


def plain(text: str) -> str:
    """Help text as a terminal shows it: docstring markup (````x````, ```x```) as plain text."""
    return _MARKUP.sub(lambda m: m.group(1) or m.group(2), text)


def _show(value: Any) -> str:
    if value is dataclasses.MISSING or value is Ellipsis:
        return "required"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={json.dumps(v)}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)


def cli_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of ``cls`` that are command-line options."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]


def options(cls: type, *, lists: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    """One keyword option per command-line field of ``cls``: ``--field-name`` plus its aliases,
    help from the field's docstring with the default, None unless given. Fields named in
    ``lists`` accept comma-separated values (an ablation)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    docs = field_docs(cls)
    params = []
    for f in cli_fields(cls):
        kind = kind_of(hints[f.name])
        help_text = _help_text(f, hints[f.name], kind, docs, lists)
        if f.metadata.get("argument"):
            # optional to click, as a --config file may give it; build() says when it is missing
            default = typer.Argument(
                None, help=help_text, show_default=False, metavar=f.name.upper()
            )
        else:
            default = typer.Option(None, *_decls(f, kind), help=help_text, show_default=False)
        params.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                # an ablation's values arrive as one comma-separated string
                annotation=(str if f.name in lists else CLI_TYPES.get(kind, str)) | None,
            )
        )
    return params


def _decls(f: dataclasses.Field, kind: str) -> list[str]:
    """The option names of field ``f``: ``--field-name`` (with its negative for a flag) and
    its aliases."""
    flag = "--" + f.name.replace("_", "-")
    aliases = tuple(f.metadata.get("aliases", ()))
    if kind == "params":  # repeated --param KEY=VALUE, under the field's own name too
        return list(dict.fromkeys([*aliases, flag]))
    if kind == "bool":
        negative = f.metadata.get("negative") or f"--no-{flag[2:]}"
        return [f"{flag}/{negative}", *aliases]
    return [flag, *aliases]


def _help_text(
    f: dataclasses.Field, hint: Any, kind: str, docs: dict[str, str], lists: tuple[str, ...]
) -> str:
    """The help of field ``f``: its docstring as plain text, its choices, how to give several
    values, and its default."""
    help_text = plain(docs.get(f.name, ""))
    choices = choices_of(hint)
    if choices:
        help_text += f" Choices: {', '.join(map(str, choices))}."
    if f.name in lists:
        help_text += " Several, comma-separated: an ablation."
    if kind == "list":
        help_text += " Comma-separated."
    help_text = help_text.replace("[", "(").replace("]", ")")
    return help_text + f" (default: {_show(default_of(f))})"


CONFIG_OPTION = inspect.Parameter(
    "config",
    inspect.Parameter.KEYWORD_ONLY,
    default=typer.Option(None, "--config", "-c", help="A YAML or TOML file of these settings."),
    annotation=Path | None,
)


def register(
    app: typer.Typer,
    name: str,
    cls: type[C],
    run: Callable[[C], None],
    *,
    help: str | None = None,
    wrap: Callable[[Callable], Callable] | None = None,
) -> None:
    """Register ``app`` command ``name`` whose options are ``cls``'s fields and ``--config``; it
    calls ``run`` with the built config. Help: ``help``, else ``run``'s docstring."""

    def command(**kwargs: Any) -> None:
        config = kwargs.pop("config")
        chosen = choose(cls, kwargs, config)
        run(build(cls, {k: v[0] for k, v in chosen.items()}))

    _install(app, name, command, options(cls), help or cls.__doc__ or "", wrap)


def register_lists(
    app: typer.Typer,
    name: str,
    cls: type,
    run: Callable[[dict[str, list[Any]]], None],
    *,
    lists: tuple[str, ...],
    help: str,
    wrap: Callable[[Callable], Callable] | None = None,
) -> None:
    """``register`` for a command whose ``lists`` fields take several values (an ablation):
    ``run`` gets the chosen settings as ``{field: [values]}`` and builds the config itself."""

    def command(**kwargs: Any) -> None:
        config = kwargs.pop("config")
        run(choose(cls, kwargs, config, lists=lists))

    _install(app, name, command, options(cls, lists=lists), help, wrap)


def _install(
    app: typer.Typer,
    name: str,
    command: Callable[..., None],
    params: list[inspect.Parameter],
    help: str,
    wrap: Callable[[Callable], Callable] | None,
) -> None:
    command.__signature__ = inspect.Signature([*params, CONFIG_OPTION])  # type: ignore[attr-defined]
    command.__doc__ = plain(help)
    command.__name__ = f"{name.replace('-', '_')}_command"
    app.command(name)(wrap(command) if wrap else command)
