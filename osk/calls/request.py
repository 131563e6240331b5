"""What a node write asks for, defined once: ``NewNode`` (create_node) and ``NodeEdit``
(update_node). A surface builds one (the MCP server from its tool arguments, which name the
same fields: a test keeps them equal; ``osk import`` from a line, whose keys are derived from
``NewNode``), ``Engine`` hands it on, and the write path (``osk.writes.write``) reads it; a new
argument is a field here and the rule that uses it there.

A node's fields are listed once each: its front matter keys in ``osk.store.node.KEYS`` (those a
writer gives are ``node.WRITTEN_FIELDS``), where it goes (``PLACEMENT``) here. The classes below
declare their fields with types, so a reader and the type checker see them; a test keeps them
equal to these lists (tests/calls/test_node_fields.py).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Where a new node goes and what it says besides its front matter; ``scope`` is the session's
# unless given.
PLACEMENT = ("title", "body", "space", "cluster", "scope")


@dataclass(frozen=True)
class NewNode:
    """A node to create: its title, summary and body, where it goes (Space, cluster folder,
    and for a Scope node the scope, default the session's), who drafted it, what it cites."""

    title: str
    summary: str
    body: str
    space: str
    cluster: str
    drafter: str
    scope: str | None = None
    derived_from: Sequence[str] = ()
    conflicts: Sequence[str] = ()
    valid_from: str | None = None
    valid_to: str | None = None
    supersedes: str | None = None
    hub_summary: str | None = None  # a new cluster's hub, written in the same call


@dataclass(frozen=True)
class NodeEdit:
    """A change to a node: a full body (with ``expect_hash``) or one passage (``old_text`` ->
    ``new_text``), and any of summary, edges, drafter, valid time; ``recheck_of`` names the
    recheck candidates it resolves (with no change: a re-citation). None keeps what is there."""

    body: str | None = None
    expect_hash: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    summary: str | None = None
    derived_from: Sequence[str] | None = None
    conflicts: Sequence[str] | None = None
    drafter: str | None = None
    recheck_of: Sequence[str] = ()
    valid_from: str | None = None
    valid_to: str | None = None
    supersedes: str | None = None
