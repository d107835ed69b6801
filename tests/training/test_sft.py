"""LoRA SFT with TRL on the embedded model: a two-step smoke run (slow)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_two_steps_of_lora_sft_write_an_adapter_that_loads(tmp_path):
    from stratagem.backends.hf import HFBackend
    from stratagem.training.sft import SFTArgs, train_sft
    from stratagem.training.sft_data import write_dataset

    write_dataset("kuhn", tmp_path / "data", sizes={"kuhn": 40})
    adapter = train_sft(
        SFTArgs(
            data=tmp_path / "data/kuhn",
            out=tmp_path / "run",
            max_steps=2,
            batch_size=2,
            eval_steps=2,
            save_steps=2,
            eval_examples=4,
        )
    )
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 32 and config["lora_alpha"] == 64
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    backend = HFBackend(adapter=str(adapter))
    assert backend.model_id.endswith(str(adapter))


def test_a_game_filter_that_matches_nothing_is_refused(tmp_path):
    from stratagem.errors import ConfigError
    from stratagem.training.sft import SFTArgs, train_sft
    from stratagem.training.sft_data import write_dataset

    write_dataset("kuhn", tmp_path / "data", sizes={"kuhn": 10})
    with pytest.raises(ConfigError, match="no rows of ipd"):
        train_sft(SFTArgs(data=tmp_path / "data/kuhn", out=tmp_path / "run", games=("ipd",)))
    assert not (tmp_path / "run" / "adapter").exists()
