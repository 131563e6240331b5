"""Protected regions as the search index sees them (``osk.authority.protection``).

What is indexed is what readers are served: the approved version while a change waits for the
person's review. ``Regions`` remembers the regions and the approvals generation the index last
read them under; when the approvals ledger changes, the files in the old and new regions are
read again (``moved``).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from typing import TYPE_CHECKING, Any

from osk.errors import OskError
from osk.search.versions import parse_node
from osk.store.vault import Vault

if TYPE_CHECKING:
    from osk.store.node import Node

# osk.authority.protection.APPROVALS (a test keeps the two equal): while this ledger does not exist
# no region is protected, and the index never imports osk.authority.protection.
APPROVALS_LEDGER = "approvals"


class Regions:
    """The protected regions of one vault, as last read (none until the first ``moved``)."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.regions: tuple[str, ...] = ()
        self.approvals: object = None  # the approvals ledger's stat when regions were read

    def protected(self) -> bool:
        return self.vault.ledger_path(APPROVALS_LEDGER).exists()

    def served(self, rel: str, node: Node) -> Node | None:
        """The version readers must see (the approved one while a protected change waits), or
        None while the file must be treated as absent: a pending creation, or an approved
        version that has not reached this device yet."""
        if not self.protected():
            return node
        protection = _protection()
        try:
            served = protection.served(self.vault, rel, node.text)
        except OskError:
            return None
        if served.text is None:
            return None
        return node if served.text == node.text else parse_node(rel, served.text)

    def moved(self, *known: Iterable[str]) -> set[str]:
        """Paths of ``known`` to re-read because the protected regions or their approvals
        changed since the last look."""
        if not self.protected():
            stale_regions, self.regions, self.approvals = self.regions, (), None
        else:
            protection = _protection()
            generation = protection.generation(self.vault)
            if generation == self.approvals:
                return set()
            regions = protection.regions(self.vault)
            stale_regions = (*self.regions, *regions)
            self.regions, self.approvals = regions, generation
        if not stale_regions:
            return set()
        return {rel for rel in chain(*known)
                if any(rel == r or rel.startswith(r.rstrip("/") + "/") for r in stale_regions)}

    def unmoved(self) -> bool:
        """Whether ``moved`` would find nothing to re-read: the approvals ledger as it was
        last read (one stat while there is none, two while there is)."""
        if not self.protected():
            return not self.regions
        return bool(_protection().generation(self.vault) == self.approvals)

    def served_approvals(self) -> list[Any] | None:
        """The approvals generation the served versions were read under (None: no region)."""
        approvals = self.approvals if self.protected() else None
        return list(approvals) if isinstance(approvals, tuple) else None

    def approvals_now(self) -> list[Any] | None:
        """The approvals generation on disk now, in the form ``served_approvals`` records it
        (None: no region): a fresh process, which has read no region, compares it with the
        one an index on disk was read under. While they are equal every served version that
        index holds is still the one to serve (``moved`` reads nothing again either)."""
        if not self.protected():
            return None
        generation = _protection().generation(self.vault)
        return list(generation) if isinstance(generation, tuple) else None


def _protection() -> Any:
    from osk.authority import protection  # only once an approvals ledger exists (see protected)

    return protection
