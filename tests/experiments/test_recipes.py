"""The recipes in experiments/recipes/: one TOML file per documented run of docs/results/, each a
config file its first line's command reads (``stratagem ... --config FILE``). No model is
loaded: every file must name a real command, hold only fields of that command's settings
class, and build a valid settings object (checked too, where the check needs no earlier run's
output on disk); every results page has recipes, and names each of its own."""

from __future__ import annotations

import dataclasses
import importlib
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer

from stratagem.cli.main import COMMANDS, load_command
from stratagem.cli.options import register
from stratagem.cli.train import TRAINERS
from stratagem.errors import ConfigError
from stratagem.settings import build, choose, read_config

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "experiments" / "recipes"
PAGES = ("kuhn", "ipd", "dond", "bargaining")
# python -m MODULE: the module's settings class
EXPERIMENTS = {
    "experiments.drills": ("experiments.drills.__main__", "DrillsConfig"),
    "experiments.claim_probe": ("experiments.claim_probe.__main__", "ClaimProbeConfig"),
}
# settings naming what an earlier run wrote (an SFT adapter, a data folder, a run folder): a
# recipe holding one is built, but not checked, since the check looks for it on disk
EARLIER_OUTPUT = {"adapter", "data", "run", "contexts", "catalog"}
SOURCE = re.compile(r"^# docs/results/(\w+)\.md — (.+)$")
HEADING = re.compile(r"^#{2,6}\s+(.+?)\s*(?:\{#[\w-]+\})?\s*$")


def recipes() -> list[Path]:
    return sorted(RECIPES.glob("*.toml"))


@dataclasses.dataclass(frozen=True)
class Recipe:
    path: Path
    words: list[str]  # the first line's command
    page: str  # kuhn, ipd, dond or bargaining
    section: str  # the heading of the run's section on that page


def read_recipe(path: Path) -> Recipe:
    """The recipe's two header lines: the command that runs it, and the page section it
    reproduces."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 3, f"{path.name}: no command line, source line and settings"
    assert lines[0].startswith("# "), f"{path.name}: the first line is not the command comment"
    words = shlex.split(lines[0][2:])
    assert words[-2:] == ["--config", f"experiments/recipes/{path.name}"], (
        f"{path.name}: the first line must end with --config experiments/recipes/{path.name}"
    )
    source = SOURCE.match(lines[1])
    assert source, f"{path.name}: the second line must be '# docs/results/PAGE.md — SECTION'"
    return Recipe(path, words[:-2], source.group(1), source.group(2))


def settings_of(words: list[str]) -> tuple[type, tuple[str, ...], Any]:
    """The settings class of a command line (without its --config), the fields that take
    several comma-separated values (an ablation), and the click command."""
    if words[:2] == ["python", "-m"]:
        assert len(words) == 3 and words[2] in EXPERIMENTS, f"unknown experiment: {words}"
        module, name = EXPERIMENTS[words[2]]
        cls = getattr(importlib.import_module(module), name)
        app = typer.Typer(add_completion=False)
        register(app, "recipe", cls, lambda cfg: None)  # as experiments.command builds it
        return cls, (), typer.main.get_command(app)
    assert words[0] == "stratagem" and len(words) >= 2, f"not a stratagem command: {words}"
    assert words[1] in COMMANDS, f"stratagem has no command {words[1]!r}"
    entry = COMMANDS[words[1]]
    if words[1] == "train":
        assert len(words) == 3 and words[2] in TRAINERS, f"no trainer in {words}"
        trainer = TRAINERS[words[2]]
        module, _, name = trainer.args.partition(":")
        cls = getattr(importlib.import_module(module), name)
        group = load_command("train")
        return cls, trainer.lists, group.get_command(None, words[2])
    assert len(words) == 2 and entry.settings is not None, f"{words} takes no --config"
    cls = getattr(importlib.import_module(f"stratagem.cli.{entry.module}"), entry.settings)
    return cls, (), load_command(words[1])


def arms(cls: type, path: Path, lists: tuple[str, ...]) -> list[dict[str, Any]]:
    """The settings values of each run the recipe starts: one, or one per value of its
    ablation field."""
    chosen = choose(cls, {}, path, lists=lists)
    varied = [key for key, values in chosen.items() if len(values) > 1]
    assert len(varied) <= 1, f"{path.name}: ablates {varied}; one setting at a time"
    base = {key: values[0] for key, values in chosen.items()}
    if not varied:
        return [base]
    return [{**base, varied[0]: value} for value in chosen[varied[0]]]


@pytest.mark.parametrize("path", recipes(), ids=lambda p: p.stem)
def test_recipe_builds_valid_settings(path: Path):
    recipe = read_recipe(path)
    cls, lists, command = settings_of(recipe.words)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(read_config(path)) - fields)
    assert not unknown, f"{path.name}: {unknown} are not fields of {cls.__name__}"
    command.make_context(recipe.words[-1], ["--config", str(path)])  # the command line parses
    for values in arms(cls, path, lists):
        cfg = build(cls, values)
        if EARLIER_OUTPUT & set(values):
            continue  # its check would look for an earlier run's output
        if hasattr(cfg, "check"):
            cfg.check()
        if hasattr(cfg, "drill_options"):
            cfg.drill_options()


@pytest.mark.parametrize("path", recipes(), ids=lambda p: p.stem)
def test_recipe_names_its_section_and_the_page_names_it(path: Path):
    recipe = read_recipe(path)
    page = ROOT / "docs" / "results" / f"{recipe.page}.md"
    assert page.exists(), f"{path.name}: no page {page.name}"
    text = page.read_text(encoding="utf-8")
    headings = [m.group(1) for line in text.splitlines() if (m := HEADING.match(line))]
    assert recipe.section in headings, f"{path.name}: {page.name} has no section {recipe.section!r}"
    assert f"`experiments/recipes/{path.name}`" in text, f"{page.name} does not name {path.name}"


def test_every_results_page_has_recipes():
    pages = {read_recipe(path).page for path in recipes()}
    missing = [page for page in PAGES if page not in pages]
    assert not missing, f"no recipe reproduces a run of {missing}"


def test_a_misspelt_key_is_refused(tmp_path: Path):
    source = RECIPES / "sepo-kuhn-card-l1.toml"
    copy = tmp_path / source.name
    shutil.copy(source, copy)
    with copy.open("a", encoding="utf-8") as f:
        f.write("learning_rat = 1e-4\n")
    cls, lists, _ = settings_of(read_recipe(source).words)
    with pytest.raises(ConfigError, match="unknown setting 'learning_rat'.*learning_rate"):
        choose(cls, {}, copy, lists=lists)
