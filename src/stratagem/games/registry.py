"""The game registry (kept apart from ``games/__init__`` so game modules can import it)."""

from __future__ import annotations

from stratagem.registry import Registry

GAMES: Registry = Registry("game")
