"""A node's trust state as its front matter gives it: the ``trust`` key, or when absent, its
author's (the person's nodes are confirmed, an agent's inferred). Part of the node format,
so it sits in the store: ``osk.store.node`` reads it without building the contract's model,
and ``osk.authority.trust`` (what may be injected, ``osk confirm``) builds on it.
"""

from __future__ import annotations

CONFIRMED, INFERRED = "confirmed", "inferred"


def state_of(trust: str | None, author: str) -> str:
    """A node's trust state from its front matter: the ``trust`` key, or absent, its
    ``author``'s (the person's nodes are confirmed, an agent's inferred)."""
    if trust:
        return trust
    return CONFIRMED if author == "user" else INFERRED
