"""Settings dataclasses: one keyword-only dataclass per job, a docstring under each field.

The same dataclass is the job's documentation, its config file schema (YAML or TOML, any field)
and, through ``cli.options``, its command-line options. ``choose`` merges a config file with
overrides, ``build`` validates the result with pydantic into the dataclass (a bad value is one
line naming its flag). Field metadata (``opt``/``flags``) adds short flags or old names, a custom
negative for a switch, or keeps a field out of the command line.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import functools
import inspect
import json
import math
import os
import textwrap
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo

from stratagem.errors import ConfigError, UnknownNameError, did_you_mean, shown

C = TypeVar("C")
GIVEN = "_given_settings"
MAX_COUNT = 10**9  # the most of any count (episodes, iterations, steps): beyond, no run ends
MAX_INT = 2**63 - 1  # any integer setting: beyond, numpy and torch cannot hold it
CONFIG_BYTES = 1 << 20  # the largest config file read
Positive = Annotated[int, Field(gt=0, le=MAX_COUNT)]
NonNegative = Annotated[int, Field(ge=0, le=MAX_COUNT)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def flags(
    *aliases: str, negative: str | None = None, cli: bool = True, argument: bool = False
) -> dict[str, Any]:
    """Field metadata: extra flags for the option (``"-g"``, an old ``"--rank"``), the negative
    flag of a switch (``"--raw"`` instead of ``--no-normalise``), ``cli=False`` to keep the
    field out of the command line (a config file still sets it), or ``argument=True`` for a
    positional argument."""
    return {"aliases": aliases, "negative": negative, "cli": cli, "argument": argument}


def opt(
    default: Any,
    *aliases: str,
    negative: str | None = None,
    cli: bool = True,
    argument: bool = False,
) -> Any:
    """``dataclasses.field`` with a default and ``flags(...)`` metadata."""
    meta = flags(*aliases, negative=negative, cli=cli, argument=argument)
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def check_folder_text(text: str, flag: str = "--out") -> None:
    """Refuses a folder name that is empty (it would mean the current folder) or holds bytes
    that are not UTF-8 (run.json, the lock and the resume hint could not name it).

    Raises:
        ConfigError: one line naming ``flag``.
    """
    if not text.strip():
        raise ConfigError(f"{flag} is empty; give a folder for the run")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{flag} {shown(text)} holds bytes that are not UTF-8; name the folder in UTF-8"
        ) from None


def normal_path(path: str | Path) -> str:
    """Returns ``path`` absolute, ``~`` expanded and symlinks resolved: the form a path takes
    in a fingerprint, so one folder named two ways (relative, absolute, a link) is one."""
    return os.path.realpath(os.path.expanduser(path))


def normal_paths(text: str | None) -> str | None:
    """``normal_path`` of each comma-separated path of ``text`` (stacked adapters); None stays."""
    return None if text is None else ",".join(normal_path(p) for p in text.split(",") if p)


def _folder_text(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        check_folder_text(value, "--" + (info.field_name or "out").replace("_", "-"))
    return value


def _distinct(names: list[str] | None) -> list[str] | None:
    twice = sorted(n for n, k in collections.Counter(names or []).items() if k > 1)
    if twice:
        raise ConfigError(f"{shown(twice[0])} is named twice; give each name once")
    return names


OutFolder = Annotated[Path, BeforeValidator(_folder_text)]  # a run folder: "" is refused
Distinct = Annotated[list[str], AfterValidator(_distinct)]  # names, each at most once


@dataclasses.dataclass(kw_only=True)
class SizeSettings:
    """The guard against a run far beyond what the machine can finish."""

    yes: bool = opt(False, "-y")
    """Start a run of more than 1,000,000 episodes without asking (without it, such a run prints
    its estimate, episodes and disk, and asks on a terminal; elsewhere it is refused)."""


@dataclasses.dataclass(kw_only=True)
class RaySettings:
    """Where to run: this process, or Ray workers (runtime settings: a run resumes either way)."""

    ray: bool = False
    """Run on Ray: a local cluster unless --ray-address is given."""
    ray_address: str | None = None
    """Ray cluster to run on (auto, HOST:6379, ray://HOST:10001); implies --ray."""
    workers: Positive | None = None
    """Ray workers [one per CPU, or per GPU for hf models]."""
    ray_timeout: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 10.0
    """Seconds to wait for the Ray cluster at --ray-address to answer before giving up."""

    def ray_target(self) -> str | None:
        """Returns None (no Ray), ``local`` or a cluster address; refuses workers without Ray."""
        target = self.ray_address or ("local" if self.ray else None)
        if self.workers is not None and target is None:
            raise ConfigError("--workers sets the number of Ray workers: add --ray")
        return target

    def ray_options(self) -> dict[str, Any]:
        """The keyword arguments of a Ray player or backend: ``address``, ``workers`` and
        ``connect_timeout``."""
        return {
            "address": self.ray_target(),
            "workers": self.workers,
            "connect_timeout": self.ray_timeout,
        }


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass ``cls`` and its bases, by field name (a
    subclass's docstring wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = typing.cast(ast.ClassDef, ast.parse(source).body[0]).body
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.replace("``", "").split())
    return docs


def core_type(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> X; ``X | None`` -> X."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return core_type(args[0])
    return annotation


def choices_of(annotation: Any) -> tuple[str, ...] | None:
    """The values a ``Literal`` field allows, else None."""
    core = core_type(annotation)
    return typing.get_args(core) if typing.get_origin(core) is Literal else None


def kind_of(annotation: Any) -> str:
    """How a field is read from the command line: bool, int, float, path, params, list or str."""
    core = core_type(annotation)
    origin = typing.get_origin(core)
    if dict in (origin, core):  # a bare ``dict`` too
        return "params"
    if origin in (list, tuple) or core in (list, tuple):
        return "list"
    return {bool: "bool", int: "int", float: "float", Path: "path"}.get(core, "str")


# paths are read as text, so that validation sees what was typed ("" is not ".")
CLI_TYPES = {"bool": bool, "int": int, "float": float, "path": str, "params": list[str]}


def default_of(f: dataclasses.Field) -> Any:
    """A field's default (its factory called), or ``dataclasses.MISSING``."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def parse_params(items: list[str] | None) -> dict[str, Any] | None:
    """``["lam=1", "prompt_style=single"]`` -> ``{"lam": 1, "prompt_style": "single"}``.

    Values are read as JSON where they parse (numbers, true/false, null, lists), else kept as
    strings. Returns None when no item is given, so a config file's ``params`` stay.
    """
    if not items:
        return None
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param takes KEY=VALUE, got {shown(item)}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def choose(
    cls: type, given: Mapping[str, Any], config: Path | None, *, lists: tuple[str, ...] = ()
) -> dict[str, list[Any]]:
    """Every setting of ``cls`` a user chose, file first and flags on top, checked: each as a
    list of values (several only for the ``lists`` fields)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    chosen: dict[str, Any] = read_config(config) if config is not None else {}
    for key in chosen:
        if key not in hints:
            raise ConfigError(
                f"unknown setting {shown(key)}{did_you_mean(str(key), hints)} in {config}; "
                f"valid settings: {', '.join(hints)}"
            )
    for key, value in given.items():
        if value is None:
            continue
        if kind_of(hints[key]) == "params":
            value = {**chosen.get(key, {}), **(parse_params(value) or {})}
        chosen[key] = value
    return {
        key: _setting_values(key, value, hints[key], key in lists) for key, value in chosen.items()
    }


def _setting_values(key: str, value: Any, annotation: Any, listed: bool) -> list[Any]:
    """The values chosen for setting ``key`` (of type ``annotation``): a comma-separated string
    split into a list setting's items, or into several values when ``listed``; raises
    ``UnknownNameError`` on a value its ``Literal`` does not allow."""
    if kind_of(annotation) == "list" and isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if listed and isinstance(value, str):
        values = [v.strip() for v in value.split(",") if v.strip()]
    else:
        values = [value]
    choices = choices_of(annotation)
    for v in values:
        if choices and v is not None and v not in choices:
            raise UnknownNameError("--" + key.replace("_", "-"), str(v), choices)
    return values


def build(cls: type[C], values: Mapping[str, Any]) -> C:
    """An instance of dataclass ``cls`` from setting values, validated by pydantic; a missing or
    bad value is a ``ConfigError`` naming its flag."""
    from pydantic import TypeAdapter, ValidationError

    missing = [
        f
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if default_of(f) in (dataclasses.MISSING, Ellipsis) and f.name not in values
    ]
    if missing:
        # a positional argument is named as the usage line shows it: RUN, not --run
        names = ", ".join(
            f.name.upper() if f.metadata.get("argument") else "--" + f.name.replace("_", "-")
            for f in missing
        )
        raise ConfigError(f"missing {names} (on the command line or in --config FILE)")
    try:
        instance = TypeAdapter(cls).validate_python(dict(values))
    except ValidationError as exc:
        err = exc.errors()[0]
        if isinstance(err.get("ctx", {}).get("error"), ConfigError):
            raise err["ctx"]["error"] from None  # a validator's own one line
        key = ".".join(str(x) for x in err["loc"])
        flag = "--" + key.replace("_", "-")
        raise ConfigError(
            f"bad value for {flag}: {err['msg']} (got {shown(err.get('input'))})"
        ) from None
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        bad = _out_of_range(getattr(instance, f.name))
        if bad is not None:
            raise ConfigError(f"bad value for --{f.name.replace('_', '-')}: {bad}")
    vars(instance)[GIVEN] = frozenset(values)  # not a field: asdict and equality ignore it
    return instance


def _out_of_range(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` (a setting, or an item of one) is no number a setting may hold, else None:
    every number is finite (nan, inf) and every integer fits 64 bits."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return f"must be at most {MAX_INT} in size, got {shown(value)}"
    if depth < 4 and isinstance(value, list | tuple | dict):
        items = value.values() if isinstance(value, dict) else value
        return next(filter(None, (_out_of_range(v, depth + 1) for v in items)), None)
    return None


def given_settings(instance: Any) -> frozenset[str]:
    """Returns the names of the settings chosen for a ``build`` instance (file or flags), as
    opposed to left at their defaults; empty for an instance built otherwise."""
    return vars(instance).get(GIVEN, frozenset())


def resolved(cfg: Any) -> dict[str, Any]:
    """The config as JSON-ready data, for the ``config.json`` every run folder holds."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def read_config(path: Path) -> dict[str, Any]:
    """Returns the settings in the YAML or TOML file at ``path`` (TOML by its suffix).

    The file is read with limits: at most ``CONFIG_BYTES``, and YAML anchors and aliases are
    refused (an alias bomb of a few hundred bytes expands to billions of values), so a hostile
    file costs a bounded time and memory.

    Raises:
        ConfigError: a missing, unreadable, oversized or malformed file, one with anchors or
            aliases, or one that is not a mapping.
    """
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"config file {path} is not a file")
    try:
        with open(path, "rb") as f:
            raw = f.read(CONFIG_BYTES + 1)
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    if len(raw) > CONFIG_BYTES:
        raise ConfigError(f"config file {path} is over {CONFIG_BYTES >> 20} MB; no config is")
    import yaml

    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.load(text, Loader=_plain_yaml_loader())  # noqa: S506 (a SafeLoader)
    except (yaml.YAMLError, ValueError) as exc:  # TOMLDecodeError; an int past 4,300 digits
        raise ConfigError(f"config file {path} is not valid: {_first_line(exc)}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings")
    return data


def _first_line(exc: Exception) -> str:
    line = (str(exc).splitlines() or [type(exc).__name__])[0]
    return line if len(line) <= 200 else line[:199] + "…"


@functools.cache
def _plain_yaml_loader() -> type:
    """A ``yaml.SafeLoader`` that refuses anchors and aliases (``&a``, ``*a``, ``<<: *a``)."""
    import yaml

    class PlainLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise yaml.YAMLError(
                    f"line {event.start_mark.line + 1}: YAML anchors and aliases (&name, "
                    "*name) are not read in config files; write the values out"
                )
            return super().compose_node(parent, index)

    return PlainLoader
