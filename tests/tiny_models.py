"""The tiny random Llama the tests build around the embedded model's tokenizer (real code paths
in seconds): one config, sized by keywords."""

from __future__ import annotations

from typing import Any

SIZES = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
)
SMALLER = dict(  # one layer: enough where the weights are never trained
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
)


def tiny_llama_config(tokenizer: Any, **overrides: Any) -> Any:
    """A ``LlamaConfig`` of ``SIZES`` (``overrides`` replace any) over ``tokenizer``'s
    vocabulary, its pad token the tokenizer's."""
    from transformers import LlamaConfig

    settings = {
        "vocab_size": len(tokenizer),
        **SIZES,
        "pad_token_id": tokenizer.pad_token_id,
        **overrides,
    }
    return LlamaConfig(**settings)
