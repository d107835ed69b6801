"""LLM agents (backend + game prompt + parser + fallback) and action parsing."""
