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


def _reexports():
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "src" / "stratagem"
    for path in sorted(package.rglob("*.py")):
        if path.read_text().lstrip('"').startswith("Kept for one release"):
            yield ".".join(path.relative_to(package.parent).with_suffix("").parts)


@pytest.mark.parametrize("old", list(_reexports()))
def test_a_moved_modules_old_path_still_imports_its_names(old):
    module = importlib.import_module(old)
    new = module.__doc__.split("``")[1]
    public = [n for n in vars(importlib.import_module(new)) if not n.startswith("_")]
    assert public and all(hasattr(module, n) for n in public if n != "annotations")


def test_no_library_module_imports_a_kept_path():
    import ast
    from pathlib import Path

    olds = set(_reexports())
    package = Path(__file__).resolve().parents[1] / "src" / "stratagem"
    users = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in olds:
                users.append(f"{path.name}: {node.module}")
            elif isinstance(node, ast.Import):
                users += [f"{path.name}: {a.name}" for a in node.names if a.name in olds]
    assert len(olds) >= 10 and users == []
