"""Subcommand configs: pydantic models loadable from YAML/TOML, overridden by flags."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from stratagem.errors import ConfigError, did_you_mean

M = TypeVar("M", bound=BaseModel)


def load_config(model: type[M], path: Path | None, **flags: Any) -> M:
    """``model`` from the file at ``path`` (if any), with every flag that is not None on top."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read(path)
    data.update({k: v for k, v in flags.items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, model)) from None


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
            raise ConfigError(f"--param takes KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"config file {path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"config file {path} is not valid: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings")
    return data


def _one_line(exc: ValidationError, model: type[BaseModel]) -> str:
    err = exc.errors()[0]
    key = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden":
        hint = did_you_mean(key, model.model_fields)
        return f"unknown setting {key!r}{hint}; valid settings: {', '.join(model.model_fields)}"
    return f"bad value for {key!r}: {err['msg']} (got {err.get('input')!r})"
