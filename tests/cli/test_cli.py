"""CLI smoke tests in a subprocess, as a user runs them."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def stratagem(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", *args], capture_output=True, text=True, cwd=cwd
    )


def test_eval_ipd_prints_every_metric_with_error(tmp_path):
    r = stratagem("eval", "--game", "ipd", "--agent", "strategy:TitForTat", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for label in (
        "Pay per round (u, train pool)",
        "Exploit (e, exploit pool)",
        "Collusion (c, collusive pool)",
        "Externality (x, train pool)",
        "Pay per round (robust pool)",
        "Safety J",
        "NRA",
        "± stderr",
    ):
        assert label in r.stdout, label
    assert "0.6250" in r.stdout
    # a strategy writes no answers: its parse and token rates do not apply, shown as —
    for label in ("Parse-failure rate", "Fallback rate", "Tokens per decision"):
        assert re.search(rf"{label} +│ +— +│ +0 ", r.stdout), label
    run = tmp_path / "runs/ipd/strategy_TitForTat-s0-n20"
    assert {"run.json", "traces.jsonl", "metrics.csv", "metrics.md"} <= {
        p.name for p in run.iterdir()
    }


def test_eval_kuhn_prints_exact_exploitability(tmp_path):
    r = stratagem(
        "eval", "--game", "kuhn", "--agent", "strategy:NashApprox", "-n", "3", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert "Exact exploitability" in r.stdout and "0.000000" in r.stdout


def test_report_rebuilds_identical_metrics(tmp_path):
    r = stratagem(
        "eval",
        "--game",
        "kuhn",
        "--agent",
        "strategy:TightValue",
        "-n",
        "4",
        "-o",
        "run",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    original = (tmp_path / "run/metrics.csv").read_text()
    (tmp_path / "run/metrics.csv").unlink()
    (tmp_path / "run/metrics.md").unlink()
    r = stratagem("report", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run/metrics.csv").read_text() == original


def test_unknown_names_get_one_line_with_suggestion(tmp_path):
    for args, expected in [
        (("eval", "--game", "ipdd", "--agent", "strategy:TitForTat"), "did you mean 'ipd'"),
        (("eval", "--game", "ipd", "--agent", "strategy:TitForTap"), "did you mean 'TitForTat'"),
        (("eval", "--game", "ipd", "--agent", "strategi:TitForTat"), "did you mean 'strategy'"),
        (("strategies", "--game", "kuhnn"), "did you mean 'kuhn'"),
        (("matrix", "--game", "auctoin"), "did you mean 'auction'"),
    ]:
        r = stratagem(*args, cwd=tmp_path)
        assert r.returncode == 2, args
        assert expected in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_bad_values_and_config_keys(tmp_path):
    r = stratagem("eval", "--game", "ipd", "--agent", "strategy:TitForTat", "-n", "0", cwd=tmp_path)
    assert r.returncode == 2 and "episodes" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "cfg.yaml").write_text("game: ipd\nagent: strategy:TitForTat\nepisdes: 3\n")
    r = stratagem("eval", "--config", "cfg.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean 'episodes'" in r.stderr


def test_config_file_with_flag_override(tmp_path):
    (tmp_path / "cfg.toml").write_text(
        'game = "ipd"\nagent = "strategy:TitForTat"\nepisodes = 50\n'
    )
    r = stratagem("eval", "--config", "cfg.toml", "--episodes", "2", "-o", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads((tmp_path / "run/run.json").read_text())["fingerprint"]["episodes"] == 2


def test_matrix_writes_table_and_heatmap(tmp_path):
    r = stratagem("matrix", "--game", "negotiation", "-n", "2", "-o", "m", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m/matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import pandas as pd

    table = pd.read_csv(tmp_path / "m/matrix.csv", index_col=0)
    assert table.loc["FairSplit", "FairSplit"] == 5.0
    assert table.loc["Hardball", "Accommodating"] == 0.0  # 8 + 4 > 10 every round
    # at 80 columns every strategy is named whole: the rows by name, the columns by number
    r = subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", "matrix", "--game", "auction", "-n", "1",
         "-o", "a"],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert r.returncode == 0 and "…" not in r.stdout, r.stdout
    assert "AggressiveValue" in r.stdout and "AggressiveBid" in r.stdout
    assert max(map(len, r.stdout.splitlines())) <= 80


def test_games_and_strategies_listings(tmp_path):
    r = stratagem("games", cwd=tmp_path)
    assert r.returncode == 0 and "multi_issue" in r.stdout
    r = stratagem("strategies", "--game", "ipd", cwd=tmp_path)
    assert "AlternatingDefect" in r.stdout and "exploit" in r.stdout


def test_train_commands_validate_their_choices(tmp_path):
    r = stratagem("train", "sepo", "--penalty", "sharde", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean 'shared'" in r.stderr
    r = stratagem("train", "sepo", "--penalty", "shared,per_rolout", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean 'per_rollout'" in r.stderr
    args = ("--penalty", "shared,own_episodes", "--normalisation", "round,episode")
    r = stratagem("train", "sepo", *args, cwd=tmp_path)
    assert r.returncode == 2 and "one setting at a time" in r.stderr
    r = stratagem(
        "train", "sepo", "--penalty", "shared,own_episodes", "--eval-episodes", "0", cwd=tmp_path
    )
    assert r.returncode == 2 and "eval_episodes > 0" in r.stderr and "Traceback" not in r.stderr
    r = stratagem("train", "sepo", "--safety", "1,x", cwd=tmp_path)  # the control's axis
    assert r.returncode == 2 and "takes numbers" in r.stderr and "Traceback" not in r.stderr
    r = stratagem("train", "sft", "--data", "nowhere", cwd=tmp_path)
    assert r.returncode == 2 and "gen-sft" in r.stderr and "Traceback" not in r.stderr


def test_games_lists_every_game_with_its_kind(tmp_path):
    r = stratagem("games", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    kinds = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and cells[1] and cells[2]:
            kinds[cells[1]] = cells[2]
    assert kinds == {
        **dict.fromkeys(
            ["auction", "bargaining", "dond", "ipd", "multi_issue", "negotiation"], "text"
        ),
        **dict.fromkeys(["kuhn", "leduc"], "text + tree"),
        **dict.fromkeys(["meeting", "fruit", "debate"], "dialogue"),
    }


def test_games_reads_whole_at_80_columns(tmp_path):
    env = {**os.environ, "COLUMNS": "80"}
    r = subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", "games"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout and max(map(len, r.stdout.splitlines())) <= 80
    assert "dialogue: solve, psro, imitate, dialogue" in r.stdout
    flat = " ".join(r.stdout.split())  # a long line of defaults wraps, never cut
    assert 'bargaining: catalog=null, split="train", split_seed=42, max_rounds=10, ' in flat
    assert "dond: lam=0.0, max_turns=20" in flat


def test_every_command_takes_a_config_file(tmp_path):
    from stratagem.cli.main import COMMANDS, load_command

    for name in COMMANDS:
        command = load_command(name)
        if name in ("games", "train"):
            continue
        assert "--config" in {d for p in command.params for d in p.opts}, name
    config = tmp_path / "eval.toml"
    config.write_text('game = "ipd"\nagent = "strategy:TitForTat"\nepisodes = 2\n')
    r = stratagem("eval", "--config", str(config), "-o", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "episodes" in r.stdout and (tmp_path / "run" / "metrics.csv").exists()


def _every_command():
    """(name, click command) for every command, the trainers' subcommands included."""
    import typer

    from stratagem.cli import train
    from stratagem.cli.main import COMMANDS, load_command

    commands = {name: load_command(name) for name in COMMANDS}
    commands.update(typer.main.get_command(train._trainers(None)).commands)  # type: ignore[attr-defined]
    for name, command in commands.items():
        if getattr(command, "params", None):
            yield name, command


def test_no_two_options_of_a_command_share_a_flag():
    # click keeps the later of two options that share a flag: `solve -a hf` once reached
    # --algorithm, not --agent
    seen_any = 0
    for name, command in _every_command():
        flags = [d for p in command.params for d in [*p.opts, *p.secondary_opts]]
        assert len(flags) == len(set(flags)), (name, sorted(f for f in flags if flags.count(f) > 1))
        seen_any += 1
    assert seen_any >= 15


def test_every_params_option_is_repeatable():
    from stratagem.settings import kind_of

    assert kind_of(dict) == "params" and kind_of(dict[str, int]) == "params"
    assert kind_of(list) == "list" and kind_of(list[str] | None) == "list"
    commands = dict(_every_command())
    for name, command in commands.items():
        for p in command.params:
            if "--param" in p.opts:
                assert p.multiple, name  # `-p a=1 -p b=2`, as the help says
    acceptance = commands["acceptance"]
    ctx = acceptance.make_context("acceptance", ["-p", "max_rounds=6", "-p", "split_seed=3"])
    assert list(ctx.params["params"]) == ["max_rounds=6", "split_seed=3"]


def test_gen_sft_says_what_its_kept_chats_scored(tmp_path):
    env = {**os.environ, "COLUMNS": "200"}
    r = subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", "gen-sft", "--game", "dond", "--agents",
         "FairSplit,ValueGreedy", "-n", "1", "-o", str(tmp_path / "g")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("kept chats"))
    assert re.fullmatch(
        r"kept chats: their seats scored \d+\.\d\d on average \(episode payoff\); \d+% of the "
        r"chats scored 0; \d+% came from agreements",
        line.strip(),
    ), line
