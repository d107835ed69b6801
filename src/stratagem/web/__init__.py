"""The human play page (SPEC §7, RELIABILITY I): a person plays one seat of a game in the
browser, an agent the other.

``boards`` is what a person sees of each game and how their input becomes a decision;
``episodes`` the person's episode and the model worker (the model's turn runs off the request
path, batched); ``security`` the session key, signed cookies, rate limits and the origin check;
``storage`` the SQLite file of played games and its export as a run folder; ``app`` the FastAPI
app around one ``PlayService``; ``static/`` the page itself (HTML, CSS and one small script per
game, no build step). ``stratagem serve`` (``cli/serve.py``) starts it.
"""

from __future__ import annotations

__all__ = ["Limits", "PlayService", "create_app"]


def __getattr__(name: str):
    if name in __all__:
        from stratagem.web import app

        return getattr(app, name)
    raise AttributeError(name)
