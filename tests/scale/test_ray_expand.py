"""Tree expansion on Ray (SPEC §10): ``RayBackend`` splits every batched model call of a
dialogue tree over workers, each holding its own model; the driver alone writes the cache and the
run folder. Runs on a local Ray cluster of 2 CPUs, the model an OpenAI-compatible server on
127.0.0.1 whose replies depend on the chat and the seed only."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import signal
import uuid

import pytest
from typer.testing import CliRunner

from stratagem.agents.spec import LLMOptions, make_backend
from stratagem.backends.sharded import RayBackend, shards
from stratagem.cli.main import app
from stratagem.errors import ConfigError
from tests.backends.fault_server import FaultServer
from tests.tiny_models import SMALLER, tiny_llama_config

ray = pytest.importorskip("ray")


def test_shards_are_contiguous_balanced_and_cover_every_row():
    assert shards(7, 2) == [range(0, 4), range(4, 7)]
    assert shards(2, 8) == [range(0, 1), range(1, 2)]
    assert shards(0, 3) == []
    for n in range(0, 30):
        for parts in range(1, 6):
            cut = shards(n, parts)
            assert [i for r in cut for i in r] == list(range(n))
            assert not cut or max(map(len, cut)) - min(map(len, cut)) <= 1


def fruit_reply(request: dict, index: int) -> tuple[str, str]:
    """A fruit-game model: labels, scores and replies that depend only on the chat and seed."""
    chat = request["messages"]
    first, last = chat[0]["content"], chat[-1]["content"]
    if first.startswith("You label"):
        return ("ok", "calm")
    if first.startswith("You score"):
        return ("ok", "VALUE: 1")
    digest = hashlib.sha256(f"{last}|{request.get('seed')}".encode()).hexdigest()[:6]
    if "assertive" in last:
        return ("ok", f"No way ({digest}).\nREJECT")
    if "calm" in last:
        return ("ok", f"Fine ({digest}).\nACCEPT")
    return ("ok", f"Let me think ({digest}).")


@pytest.fixture()
def server():
    with FaultServer(handler=fruit_reply) as s:
        yield s


def solve(out, cache, model, url, *extra):
    args = ["solve", "--game", "fruit", "--instructions", "calm,assertive,any"]
    args += ["--scenarios", "3", "--replies", "2", "--seeds", "2", "--iterations", "300"]
    args += ["--agent", f"openai:{model}", "--base-url", url, "--cache", str(cache)]
    result = CliRunner().invoke(app, [*args, "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out


def test_a_dialogue_solve_on_ray_equals_the_local_one(cluster, server, tmp_path):
    model = f"fake-{uuid.uuid4().hex[:8]}"  # fresh keys in every cache the backend keeps
    local = solve(tmp_path / "local", tmp_path / "local.sqlite", model, server.url)
    asked = len(server.requests)
    distributed = solve(
        tmp_path / "ray",
        tmp_path / "ray.sqlite",
        model + "-ray",
        server.url,
        "--ray",
        "--workers",
        "2",
    )
    assert len(server.requests) - asked == asked  # every message asked again, on the workers
    for name in ("dialogues.jsonl", "policy.json", "metrics.csv"):
        assert (distributed / name).read_bytes() == (local / name).read_bytes(), name
    ran = json.loads((distributed / "expansion.json").read_text())
    assert ran["model_calls"] == json.loads((local / "expansion.json").read_text())["model_calls"]


def test_a_killed_worker_loses_only_its_shard(cluster, tmp_path):
    victims: list[int] = []
    backend_box: list[RayBackend] = []

    def reply(request, index):
        if index == 3 and not victims:  # mid-call: worker 0 dies with its shard in flight
            victims.append(backend_box[0].pids[0])
            os.kill(victims[0], signal.SIGKILL)
        return fruit_reply(request, index)

    with FaultServer(handler=reply) as s:
        options = LLMOptions(base_url=s.url, max_retries=0)
        model = f"openai:fake-{uuid.uuid4().hex[:8]}"
        backend = RayBackend(functools.partial(make_backend, model, options), workers=2)
        backend_box.append(backend)
        chats = [[{"role": "user", "content": f"calm {i}"}] for i in range(8)]
        from stratagem.backends.base import Sampling

        texts = [g.text for g in backend.generate(chats, Sampling(0.7), seeds=list(range(8)))]
        backend.close()
    expected = [fruit_reply({"messages": c, "seed": i}, 0)[1] for i, c in enumerate(chats)]
    assert victims and backend.deaths == 1
    assert texts == expected


def test_a_workers_error_is_raised_on_the_driver_as_itself(cluster, tmp_path):
    factory = functools.partial(make_backend, f"hf:{tmp_path}/no-such-model", LLMOptions())
    with pytest.raises(ConfigError, match="no such model folder"):
        RayBackend(factory, workers=1)


def test_a_sharded_model_keys_the_cache_by_its_weights_like_the_local_one(cluster, tmp_path):
    # regression: RayBackend had no fingerprint, so CachedBackend keyed its answers by the model
    # name alone and a model retrained at the same path got the old texts (RELIABILITY C1)
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from stratagem.backends.cache import CachedBackend
    from stratagem.backends.embedded import embedded_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    config = tiny_llama_config(tokenizer, **SMALLER)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    factory = functools.partial(make_backend, f"hf:{tmp_path / 'tiny'}", LLMOptions())
    local = factory().fingerprint
    backend = RayBackend(factory, workers=1)
    try:
        assert local.startswith(f"{tmp_path / 'tiny'}#") and len(local) > len(backend.model_id) + 8
        assert backend.fingerprint == local
        assert CachedBackend(backend).fingerprint == local
    finally:
        backend.close()
