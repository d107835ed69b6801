"""The human play page (SPEC §7, RELIABILITY I1-I10): a person plays one seat of a game in the
browser, an agent the other.

``boards/`` is what a person sees of each game and how their input becomes a decision (a
dedicated board per game that has one, registered by game id; the generic text board for every
other registered game); ``episodes`` the person's episode and the model worker (the model's turn
runs off the request path, batched); ``service`` all server-side state (sessions, live games,
limits, storing every game as it goes); ``security`` the session key, signed cookies, rate limits,
the origin check and the response headers; ``records`` a stored game and the id of its
configuration; ``storage`` the SQLite file of played games; ``export`` one configuration's games as
a run folder; ``study`` what the operator sets (consent, participant ids, the summary's token) and
the configuration every row records; ``app`` the FastAPI routes around one ``PlayService``;
``static/`` the page itself (HTML, CSS and one small script per board, no build step).
``stratagem serve`` (``cli/serve.py``) starts it.
"""

from __future__ import annotations

__all__ = ["Limits", "PlayService", "create_app"]


def __getattr__(name: str):
    if name in __all__:
        from stratagem.web import app

        return getattr(app, name)
    raise AttributeError(name)
