"""Dialogue games whose actions are instructions to an LLM (seed 003; SPEC §9).

- ``base``: scenarios, the ``Domain`` base class (header, chat rendering, judge and classifier
  prompts), the domain registry;
- ``meeting``: meeting scheduling (action: a day; ``PROPOSE:`` / ``ACCEPT`` lines);
- ``fruit``: fruit trading (action: a tone; ``TRADE:`` / ``ACCEPT`` / ``REJECT`` lines);
- ``debate``: debate (action: logos / ethos / pathos; an LLM judge).

The solver tree over a domain's scenario is built by ``stratagem.solvers.dialogue``.
"""

from stratagem.games.dialogue import debate, fruit, meeting  # noqa: F401  (registers domains)
from stratagem.games.dialogue.base import (
    ANY,
    DOMAINS,
    OUTCOMES,
    Domain,
    Scenario,
    Verdict,
    get_domain,
)

__all__ = ["ANY", "DOMAINS", "OUTCOMES", "Domain", "Scenario", "Verdict", "get_domain"]
