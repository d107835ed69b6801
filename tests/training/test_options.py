"""Each trainer's dataclass is the single source of its command's options."""

from __future__ import annotations

import dataclasses

import pytest
import typer

from stratagem.cli import options as cli_options
from stratagem.cli import train as cli
from stratagem.errors import ConfigError, UnknownNameError
from stratagem.settings import build, choose, field_docs
from stratagem.training.bargaining.trainer import BargainingArgs
from stratagem.training.selfplay.trainer import SelfPlayArgs
from stratagem.training.sepo.trainer import SEPOArgs
from stratagem.training.sft.trainer import SFTArgs


@pytest.mark.parametrize("cls", [SEPOArgs, SFTArgs, SelfPlayArgs, BargainingArgs])
def test_every_field_has_a_docstring_and_an_option(cls):
    # the settings classes inherit option groups: their docstrings are read along the MRO
    docs = field_docs(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert set(docs) == set(names), set(names) - set(docs)
    assert all(docs[n] for n in names)
    options = {p.name: p for p in cli_options.options(cls)}
    assert list(options) == names
    for name, param in options.items():
        assert param.default.param_decls[0].startswith("--" + name.replace("_", "-"))
        assert (
            cli_options.plain(docs[name]).replace("[", "(").replace("]", ")") in param.default.help
            and "(default: " in param.default.help
        )


def test_the_commands_show_the_dataclass_options():
    group = typer.main.get_command(cli._trainers(None))
    sepo = group.commands["sepo"]
    flags = {d for p in sepo.params for d in p.opts}
    assert {"--learning-rate", "--penalty", "--scale", "--lora-dropout", "--config"} <= flags
    assert "--normalise" in {d for p in sepo.params for d in p.opts}


def test_a_config_file_is_read_and_flags_win(tmp_path):
    config = tmp_path / "sepo.yaml"
    config.write_text("game: ipd\nsteps: 7\nrollouts: 3\n")
    chosen = choose(SEPOArgs, {"steps": 9, "game": None}, config)
    args = build(SEPOArgs, {k: v[0] for k, v in chosen.items()})
    assert (args.game, args.steps, args.rollouts) == ("ipd", 9, 3)
    (tmp_path / "bad.yaml").write_text("stepz: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'steps'"):
        choose(SEPOArgs, {}, tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="--steps"):
        build(SEPOArgs, {"steps": "many"})


def test_ablation_lists_and_choices():
    chosen = choose(SEPOArgs, {"penalty": "shared,own_episodes"}, None, lists=("penalty",))
    assert chosen["penalty"] == ["shared", "own_episodes"]
    with pytest.raises(UnknownNameError, match="did you mean 'shared'"):
        choose(SEPOArgs, {"penalty": "sharde"}, None, lists=("penalty",))
    sft = build(SFTArgs, {k: v[0] for k, v in choose(SFTArgs, {"games": "ipd,kuhn"}, None).items()})
    assert sft.games == ("ipd", "kuhn")
