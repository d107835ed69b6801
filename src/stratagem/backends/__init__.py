"""Model backends: ``hf`` (local transformers), ``openai`` (any compatible endpoint), ``scripted``.

Heavy libraries (torch, transformers, openai) are imported only when a backend is built.
"""
