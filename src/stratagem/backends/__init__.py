"""Model backends: ``hf`` (local transformers), ``openai`` (any compatible endpoint), ``vllm``
(an in-process engine on a GPU), ``scripted`` (the test double).

- ``base``: the ``Backend`` protocol, ``Sampling``, ``Generation``;
- ``hf`` with ``hf.prompts`` (prompt encoding, prefix KV reuse) and ``hf.sampling`` (per-row
  seeded sampling and stopping); ``prefix_cache`` stores prompt KV caches;
- ``openai`` with ``openai.http`` (the bounded HTTP client, retry hints) and ``openai.replies``
  (reading replies into generations);
- ``vllm``, and ``training.engines.vllm`` (the engine sampling a trainer's rollouts);
- ``trie`` (constrained choice scoring) and ``chains`` (trainers' chained token ids), shared by
  ``hf`` and ``vllm``;
- ``cache``: the persistent response cache and ``CachedBackend``, with ``cache.store`` (its SQLite
  file, opened defensively); ``embedded``: the bundled model; ``sharded``: one backend spread
  over Ray workers.

Heavy libraries (torch, transformers, openai, vllm) are imported only when a backend is built.
"""
