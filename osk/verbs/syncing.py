"""`osk sync`'s verbs as the surfaces call them: one cycle now (``once``), the daemon, and where
the vault stands without touching the network (``status``). The sync wing (``osk/sync/``) does
the work; this is its face above the engine, so a command reaches it the way it reaches every
other verb.
"""

from __future__ import annotations

from osk.sync.cycle import sync_once as once
from osk.sync.daemon import daemon, status

__all__ = ["daemon", "once", "status"]
