"""The play page run as a study: what the operator sets and what every stored game records.

- **The configuration**: ``agent_configuration`` is everything about the opponent that changes
  its play (the spec; for a language model the sampling settings, dtype, fallback, base URL,
  each adapter's path and content hash, and the weights' fingerprint: a content hash with the
  hub revision for ``hf``, a content hash of a local model folder otherwise);
  ``server_settings`` the server's own settings. Every row of the games database holds both,
  and ``export`` writes one configuration per run folder.
- **Participants**: a person gives a participant id (the page's ``?pid=``, or a short form when
  the operator asks for one) and agrees to the consent and instructions text the operator wrote
  (``--consent FILE``) before their first game; both are held by their session (another id in
  the same browser is another session, asked to consent again), and every game row records the
  id and the consent (the accepted text's sha256 and when). ``PARTICIPANT`` is what an id may
  be. An id is a name: the page shows a session its own games only, unless the study is run
  with issued ids (``issued.py``: ``ID.CODE`` links), when the code proves who holds the id and
  the page shows that participant's games across browsers.
- **The operator's summary** (``/operator``): games per configuration, completion rate,
  participants and mean scores, behind a token (``$STRATAGEM_OPERATOR_TOKEN``, or a file beside
  the database created 0600 on first start) compared in constant time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import html
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stratagem.agent import Agent
from stratagem.errors import ConfigError
from stratagem.web.boards import InputError

PARTICIPANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TOKEN_ENV = "STRATAGEM_OPERATOR_TOKEN"
MIN_TOKEN_CHARS = 32
MAX_CONSENT_CHARS = 20_000


@dataclass(frozen=True)
class Study:
    """The operator's settings of a served study, and the configuration rows record."""

    consent: str | None = None  # the consent and instructions text; None: no such screen
    ask_participant: bool = False  # a participant id is needed before the first game
    operator_token: str | None = None  # None: the operator's summary is refused to everyone
    issued_ids: bool = False  # only ids issued with their code (``issued.py``); asks for one
    configuration: Mapping[str, Any] | None = None  # the agent's; None: read from the agent
    server: Mapping[str, Any] = field(default_factory=dict)  # the server's own settings

    @property
    def consent_sha256(self) -> str | None:
        """The sha256 of the consent text as shown (None without one): what a consent record
        names, and part of the configuration id."""
        return None if self.consent is None else hashlib.sha256(self.consent.encode()).hexdigest()

    def consented(self, record: Mapping[str, Any] | None) -> bool:
        """Whether a session's consent ``record`` (``{"sha256", "at"}``, or None) accepts this
        study's text: the text accepted is the text shown now (a changed text asks again)."""
        return self.consent is None or (
            record is not None and record.get("sha256") == self.consent_sha256
        )

    def __post_init__(self) -> None:
        if self.issued_ids:  # an issued id is asked for like any other
            object.__setattr__(self, "ask_participant", True)

    def refusal(self, participant: str | None, consent: Mapping[str, Any] | None) -> str | None:
        """Why a session of ``participant`` with ``consent`` (its record, or None) may not start
        a game yet (one line), or None when it may."""
        if self.ask_participant and participant is None:
            return "give your participant id first"
        if not self.consented(consent):
            return "read and accept the study's terms first"
        return None

    def state(
        self,
        participant: str | None,
        consent: Mapping[str, Any] | None,
        tally: Mapping[str, Any],
        pending: bool,
    ) -> dict[str, Any]:
        """Returns what the page shows of the study: the consent text, whether a participant
        id is asked and whether ids are issued, the session's id and whether it accepted the
        text shown, why it may not
        start a game yet (None when it may), its ended games of this configuration
        (``GameStore.tally``: counts, total, the last one), and ``pending`` while the game that
        just ended is being stored."""
        return {
            "consent": self.consent,
            "ask_participant": self.ask_participant,
            "issued_ids": self.issued_ids,
            "participant": participant,
            "consented": self.consent is not None and self.consented(consent),
            "refusal": self.refusal(participant, consent),
            **tally,
            "pending": pending,
        }

    def authorised(self, presented: str | None) -> bool:
        """Whether ``presented`` is the operator's token (compared in constant time)."""
        if self.operator_token is None or not presented:
            return False
        return hmac.compare_digest(presented.encode(), self.operator_token.encode())


def participant_id(value: Any) -> str:
    """Returns ``value`` as a participant id.

    Raises:
        InputError: it is not 1-64 letters, digits, ``.``, ``_`` or ``-`` (starting with a
            letter or digit).
    """
    if not isinstance(value, str) or not PARTICIPANT.fullmatch(value):
        raise InputError(
            "a participant id is 1-64 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit"
        )
    return value


def agent_configuration(spec: str, agent: Agent, options: Any = None) -> dict[str, Any]:
    """Returns the configuration of ``agent``, built from ``spec`` with ``LLMOptions``
    ``options``: the spec and, for a language model, every option that changes results, each
    adapter's path and content hash, the model id and the weights' fingerprint. Without
    ``options``, a language model's sampling settings and fallback are read from the agent
    itself (a strategy's configuration is its spec). Hashing reads each weights file once per
    process."""
    from stratagem.backends.cache import weights_fingerprint

    config: dict[str, Any] = {"spec": spec}
    sampling = getattr(agent, "sampling", None)
    if options is not None:
        config.update(options.fingerprint())
        config["adapters"] = [
            {"path": str(Path(f).expanduser().resolve()), "sha256": weights_fingerprint(f)}
            for f in (options.adapter or "").split(",")
            if f
        ]
    elif sampling is not None:
        config.update(dataclasses.asdict(sampling), fallback=getattr(agent, "fallback", None))
    else:
        return config
    backend = getattr(agent, "backend", None)
    config["model_id"] = getattr(backend, "model_id", None)
    weights = getattr(backend, "fingerprint", None)
    kind, _, model = spec.partition(":")
    if not isinstance(weights, str) and kind in ("hf", "vllm"):
        if not model:
            from stratagem.backends.embedded import embedded_dir

            model = str(embedded_dir())
        folder = Path(model).expanduser()
        dtype = options.dtype if options is not None else "auto"
        weights = weights_fingerprint(folder, (), dtype) if folder.is_dir() else None
    config["weights"] = weights
    return config


def server_settings(cfg: Any) -> dict[str, Any]:
    """Returns the server's own settings (a ``ServeSettings``), without the export options,
    with the consent text's sha256 and the stratagem version."""
    from importlib.metadata import PackageNotFoundError, version

    settings = {
        k: v
        for k, v in dataclasses.asdict(cfg).items()
        if k not in ("export", "export_config", "issue")
    }
    if getattr(cfg, "consent", None):
        text = Path(cfg.consent).read_bytes()
        settings["consent_sha256"] = hashlib.sha256(text).hexdigest()
    try:
        settings["stratagem_version"] = version("stratagem")
    except PackageNotFoundError:
        settings["stratagem_version"] = None
    return settings


def read_consent(path: str | Path) -> str:
    """Returns the consent and instructions text of ``path`` (UTF-8 plain text).

    Raises:
        ConfigError: the file is missing, unreadable, empty, or longer than 20,000 characters.
    """
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--consent {path}: cannot read it ({exc})") from None
    if not text or len(text) > MAX_CONSENT_CHARS:
        raise ConfigError(f"--consent {path}: give 1 to {MAX_CONSENT_CHARS} characters of text")
    return text


def operator_token(path: str | Path) -> str:
    """Returns the operator's token: ``$STRATAGEM_OPERATOR_TOKEN`` when set, else the token in
    ``path`` (created with 0600 permissions, 256 random bits, on first start).

    Raises:
        ConfigError: the variable is shorter than 32 characters, or the file is readable by
            other users, short, or cannot be written.
    """
    env = os.environ.get(TOKEN_ENV)
    if env is not None:
        if len(env) < MIN_TOKEN_CHARS:
            raise ConfigError(f"${TOKEN_ENV} must hold at least {MIN_TOKEN_CHARS} characters")
        return env
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot create the operator token file {path}: {exc.strerror}") from None
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise ConfigError(f"the operator token file {path} is readable by others; chmod 600 {path}")
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the operator token file {path} is short; delete it to renew")
    return token


def open_study(cfg: Any, store: Any, game: Any, agent: Agent) -> tuple[Study, str]:
    """Prepares a serving process (``cfg``: its ``ServeSettings``): claims the games database
    ``store`` (one server per file), marks the games a killed server left ``abandoned``, reads
    the consent text and the operator's token, and records ``agent``'s configuration; returns
    the study and a line for the console.

    Raises:
        ConfigError: another server uses the database; a bad consent file or token.
    """
    from stratagem.agents.spec import is_llm

    store.claim()
    abandoned = store.abandon_live()
    options = cfg.llm_options(game) if is_llm(cfg.agent) else None
    token_file = Path(cfg.db).with_name(Path(cfg.db).name + ".operator")
    study = Study(
        consent=read_consent(cfg.consent) if cfg.consent else None,
        ask_participant=cfg.participant_id or cfg.issued_ids,
        issued_ids=cfg.issued_ids,
        operator_token=operator_token(token_file),
        configuration=agent_configuration(cfg.agent, agent, options),
        server=server_settings(cfg),
    )
    where = f"${TOKEN_ENV}" if os.environ.get(TOKEN_ENV) is not None else str(token_file)
    note = f"operator's summary: /operator?token=TOKEN (the token is in {where})"
    if abandoned:
        note = f"{abandoned} games left live by a stopped server are now abandoned; {note}"
    return study, note


def export_games(cfg: Any) -> str:
    """Writes the games of ``cfg.game`` and one configuration in ``cfg.db`` (``cfg``: the
    ``ServeSettings`` of ``stratagem serve --export``) as a run folder; returns what was done
    and what reads it.

    Raises:
        ConfigError: no such database; see ``export.export_run``.
    """
    from stratagem.games import get_game
    from stratagem.metrics.registry import game_metrics
    from stratagem.metrics.sepo import SEPOGame
    from stratagem.web.storage import GameStore, export_run

    if not Path(cfg.db).is_file():
        raise ConfigError(f"--db {cfg.db}: no such games database")
    store = GameStore(cfg.db)
    try:
        n = export_run(store, cfg.game, cfg.export, agent=cfg.agent, config=cfg.export_config)
    finally:
        store.close()
    game = get_game(cfg.game, **cfg.params)
    if isinstance(game, SEPOGame) or game_metrics(game.name) is not None:
        then = f"metrics: stratagem report {cfg.export}"
    else:  # bargaining: its metrics are per tournament (stratagem.metrics.bargaining)
        then = (
            "stratagem report has no metrics for this game; its traces are in traces.jsonl "
            "(stratagem.metrics.bargaining.negotiation_rows reads them)"
        )
    return f"exported {n} {cfg.game} games to {cfg.export}; {then}"


def summary_page(entries: list[dict[str, Any]]) -> str:
    """Returns the operator's summary as an HTML page (every value escaped): one table row per
    configuration."""
    head = (
        "configuration", "game", "agent", "settings", "games", "finished", "abandoned", "live",
        "completion", "participants", "person's mean", "model's mean",
    )  # fmt: skip
    rows = []
    for e in entries:
        agent = e["agent"]
        settings = ", ".join(
            f"{k}={agent[k]}" for k in sorted(agent) if k not in ("spec", "adapters", "name")
        )
        settings += "".join(
            f", adapter {a['path']} ({a['sha256'][:12]})" for a in agent.get("adapters", [])
        )
        rate = e["completion_rate"]
        cells = (
            e["config_id"], e["game"], e["agent_spec"], settings, e["games"], e["finished"],
            e["abandoned"], e["live"], "-" if rate is None else f"{rate:.0%}",
            e["participants"], _mean(e["human_mean"]), _mean(e["model_mean"]),
        )  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(rows) or f'<tr><td colspan="{len(head)}">No games yet.</td></tr>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>stratagem · operator</title>"
        '<link rel="stylesheet" href="/static/style.css"></head><body>'
        "<h1>Games per configuration</h1>"
        f'<table id="summary"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'
        '<p class="muted">Completion: finished games over ended ones (finished or abandoned). '
        "Export one configuration with stratagem serve --export FOLDER --export-config ID.</p>"
        "</body></html>"
    )


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
