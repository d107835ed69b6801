"""Packages export their submodules' names on first use: every listed name resolves to the
submodule's object, an old name of a module that became a package resolves through its
fallback, and anything else is an AttributeError."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY = [
    "stratagem.evaluation",
    "stratagem.solvers.dialogue",
    *(f"stratagem.training.{t}" for t in ("sepo", "sft", "selfplay", "bargaining")),
]


@pytest.mark.parametrize("package", LAZY)
def test_every_exported_name_is_the_submodules_own(package):
    module = importlib.import_module(package)
    for name, sub in module._EXPORTS.items():
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{sub}"), name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_a_former_module_keeps_its_names_and_stays_light_until_asked():
    code = (
        "import sys\n"
        "from stratagem.training.sepo import SEPOArgs\n"
        "assert 'torch' not in sys.modules\n"
        "from stratagem.training.sepo import rollout_specs\n"  # the former module's name
        "from stratagem.training.sepo.trainer import rollout_specs as direct\n"
        "assert rollout_specs is direct and 'torch' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
