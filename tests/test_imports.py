"""``import stratagem`` and ``stratagem games`` stay light: no torch, transformers, openai,
pandas or pyarrow (they load only when a backend, trainer or report needs them)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "openai", "pandas", "pyarrow")


def loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_stratagem_and_rule_based_play_are_light():
    loaded = loaded_after(
        "import stratagem\n"
        "g = stratagem.get_game('kuhn')\n"
        "stratagem.play_one(g, [stratagem.get_strategy('kuhn', 'NashApprox')] * 2, 0)"
    )
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_the_games_command_is_light():
    loaded = loaded_after(
        "import sys\nsys.argv = ['stratagem', 'games']\n"
        "from stratagem.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert "stratagem.cli.info" in loaded
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_every_benchmark_script_imports():
    """A benchmark is run by hand, not by the tests, so an import a refactor broke would go
    unnoticed until someone runs it: each script is imported (not run) in one process."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = sorted((root / "benchmarks").glob("*.py"))
    assert scripts
    probe = (
        "import importlib.util, sys\n"
        "for path in sys.argv[1:]:\n"
        "    name = 'bench_' + path.split('/')[-1][:-3]\n"
        "    spec = importlib.util.spec_from_file_location(name, path)\n"
        "    sys.modules[name] = module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *map(str, scripts)], capture_output=True, text=True, cwd=root
    )
    assert done.returncode == 0, done.stderr[-2000:]
