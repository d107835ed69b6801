"""Agent specs on the command line.

- ``strategy:NAME`` — a rule-based strategy of the game;
- ``hf`` or ``hf:MODEL`` — a local transformers model (default: the embedded SmolLM2), with
  ``LLMOptions.adapter`` for a PEFT adapter;
- ``openai:MODEL`` — any OpenAI-compatible endpoint at ``LLMOptions.base_url``;
- ``vllm`` or ``vllm:MODEL`` — an in-process vLLM engine on a GPU (``pip install
  'stratagem[vllm]'``), with ``LLMOptions.adapter`` for one LoRA adapter.

A local model spec may carry its own adapter, ``hf@FOLDER`` or ``hf:MODEL@FOLDER`` (``+`` stacks
folders in order, as ``,`` does in ``--adapter``): that agent loads it in place of ``--adapter``,
so one command can pit a self-play checkpoint against another model, e.g. ``stratagem tournament
--game dond --agents hf@runs/selfplay-dond/checkpoint-2/adapter,openai:gpt-4o-mini``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from stratagem.agent import Agent
from stratagem.agents.llm import Fallback, LLMAgent
from stratagem.backends.base import Backend, Sampling
from stratagem.errors import ConfigError, UnknownNameError
from stratagem.game import Game
from stratagem.settings import normal_paths
from stratagem.strategies import get_strategy

KINDS = ("strategy", "hf", "openai", "vllm")
LLM_KINDS = ("hf", "openai", "vllm")
LOCAL_KINDS = ("hf", "vllm")  # the kinds whose spec may name an adapter after "@"


@dataclass(frozen=True)
class LLMOptions:
    """Backend and generation settings of an LLM agent (those marked * change results)."""

    temperature: float = 0.0  # *
    top_p: float = 1.0  # *
    max_new_tokens: int = 64  # *
    adapter: str | None = None  # *
    dtype: str = "auto"  # *
    fallback: Fallback = "argmax"  # *
    base_url: str | None = None  # *
    api_key_env: str = "OPENAI_API_KEY"
    max_batch: int = 64
    concurrency: int = 8
    max_retries: int = 5
    attempt_timeout: float = 60.0

    def fingerprint(self) -> dict:
        """Returns the options that change results (all but the runtime ones: API key variable,
        batch size, concurrency, retries, timeout), for run fingerprints.
        """
        runtime = {"api_key_env", "max_batch", "concurrency", "max_retries", "attempt_timeout"}
        out = {k: v for k, v in asdict(self).items() if k not in runtime}
        return {**out, "adapter": normal_paths(self.adapter)}  # one folder named two ways is one

    @property
    def sampling(self) -> Sampling:
        """The generation parameters these options set."""
        return Sampling(self.temperature, self.top_p, self.max_new_tokens)


@dataclass(frozen=True)
class AgentSpec:
    """One agent as a command line names it, parsed once (``AgentSpec.parse``): its ``kind``,
    the strategy or model ``name`` (empty: the kind's default model) and, for a local model, the
    ``adapter`` folders it names after ``@`` (comma-separated, in stacking order)."""

    text: str
    kind: str
    name: str = ""
    adapter: str | None = None

    @classmethod
    def parse(cls, text: str) -> AgentSpec:
        """Returns the spec ``text`` names.

        Raises:
            UnknownNameError: an unknown kind (with the valid ones).
            ConfigError: ``strategy:`` or ``openai:`` without a name, or nothing after ``@``.
        """
        kind = agent_kind(text)
        if kind not in KINDS:
            raise UnknownNameError("agent kind", kind, KINDS)
        base, adapter = text, None
        if kind in LOCAL_KINDS and "@" in text:
            base, _, folders = text.rpartition("@")
            if not folders.strip("+"):
                raise ConfigError(
                    f"agent {text!r}: name an adapter folder after '@' (hf@runs/x/adapter)"
                )
            adapter = ",".join(a for a in folders.split("+") if a)
        name = base.partition(":")[2]
        if kind == "strategy" and not name:
            raise ConfigError(
                f"agent {text!r} needs a name after 'strategy:', e.g. strategy:TitForTat"
            )
        if kind == "openai" and not name:
            raise ConfigError("agent 'openai:' needs a model name, e.g. openai:gpt-4o-mini")
        return cls(text, kind, name, adapter)

    @property
    def is_llm(self) -> bool:
        """Whether the spec names an LLM agent rather than a strategy."""
        return self.kind in LLM_KINDS

    def llm_options(self, options: LLMOptions) -> LLMOptions:
        """``options`` with this spec's own adapter in place of ``options.adapter``."""
        return options if self.adapter is None else replace(options, adapter=self.adapter)


def agent_kind(spec: str) -> str:
    """Returns the kind a spec names: ``strategy``, ``hf``, ``openai``, ``vllm`` (``hf@A`` is
    ``hf``), or what stands before its ``:`` when that is none of them."""
    kind = spec.partition(":")[0]
    local = kind.partition("@")[0]
    return local if local in LOCAL_KINDS else kind


def is_llm(spec: str) -> bool:
    """Returns whether ``spec`` names an LLM agent (``hf``, ``openai`` or ``vllm``) rather than a
    strategy."""
    return agent_kind(spec) in LLM_KINDS


def own_adapter(spec: str, options: LLMOptions) -> tuple[str, LLMOptions]:
    """Returns a local model spec without its ``@ADAPTER`` and the options loading that adapter
    in place of ``options.adapter`` (``+`` between folders stacks them); any other spec as given.

    Raises:
        ConfigError: nothing follows the ``@``.
    """
    if agent_kind(spec) not in LOCAL_KINDS or "@" not in spec:
        return spec, options
    parsed = AgentSpec.parse(spec)
    return spec.rpartition("@")[0], parsed.llm_options(options)


def make_agent(spec: str | AgentSpec, game: Game | str, options: LLMOptions | None = None) -> Agent:
    """Build the agent ``spec`` names for ``game`` (a spec string is parsed once, here)."""
    from stratagem.games import get_game

    game = get_game(game) if isinstance(game, str) else game
    parsed = spec if isinstance(spec, AgentSpec) else AgentSpec.parse(spec)
    if parsed.kind == "strategy":
        return get_strategy(game.name, parsed.name)
    options = options or LLMOptions()
    backend = make_backend(parsed, options)
    return LLMAgent(backend, game, options.sampling, fallback=options.fallback)


def make_backend(spec: str | AgentSpec, options: LLMOptions | None = None) -> Backend:
    """Build the model behind an LLM agent spec (``hf[:MODEL][@ADAPTER]``, ``openai:MODEL``,
    ``vllm[:MODEL][@ADAPTER]``), without an agent around it (dialogue trees call the backend
    directly).

    Raises:
        ConfigError: ``spec`` is not an LLM spec, a model folder or adapter does not exist,
            ``openai:`` has no model name, or vLLM cannot run here.
    """
    if not isinstance(spec, AgentSpec) and agent_kind(spec) not in LLM_KINDS:
        raise ConfigError(f"{spec!r} is not an LLM agent: use hf[:MODEL], openai:MODEL or vllm")
    parsed = spec if isinstance(spec, AgentSpec) else AgentSpec.parse(spec)
    if not parsed.is_llm:
        raise ConfigError(
            f"{parsed.text!r} is not an LLM agent: use hf[:MODEL], openai:MODEL or vllm"
        )
    options = parsed.llm_options(options or LLMOptions())
    kind, arg, spec = parsed.kind, parsed.name, parsed.text
    if kind == "hf":
        from stratagem.backends.hf import HFBackend

        _check_local_paths(arg, options.adapter)
        return HFBackend(
            arg or "embedded",
            adapter=options.adapter,
            dtype=options.dtype,
            max_batch=options.max_batch,
        )
    if kind == "vllm":
        from stratagem.backends.vllm import VLLMBackend, vllm_unavailable

        _check_local_paths(arg, options.adapter)
        why = vllm_unavailable()
        if why:
            raise ConfigError(f"agent {spec!r}: {why}")
        return VLLMBackend.from_options(arg, options)
    from stratagem.backends.openai import OpenAIBackend

    return OpenAIBackend.from_options(arg, options)


def _check_local_paths(model: str, adapter: str | None) -> None:
    """Refuse a model path or adapter folder that does not exist before any weights load.

    A model written as a path (``/``, ``./``, ``../`` or ``~``) must exist; ``org/name`` is a
    Hugging Face id and goes to ``from_pretrained`` as is.
    """
    from pathlib import Path

    if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().exists():
        raise ConfigError(f"{model}: no such model folder")
    for folder in (adapter or "").split(","):
        if folder and not Path(folder).expanduser().is_dir():
            raise ConfigError(f"adapter {folder}: no such adapter folder")
