"""The vault a surface names, found or made: the engine's face for a command that needs a vault
and no session (``Engine.open`` finds its vault here too)."""

from __future__ import annotations

import os
from pathlib import Path

from osk.store.vault import Vault as Vault  # re-exported: the type a surface names one by
from osk.store.vault import init, locate


def open_vault(where: Vault | str | os.PathLike[str] | None = None,
               cwd: Path | None = None) -> Vault:
    """``where`` if it is a vault already; else ``--vault``, ``OSK_VAULT``, then the working
    folder's ancestors (``osk.store.vault.locate`` says how each is checked)."""
    return where if isinstance(where, Vault) else locate(where, cwd)


def make_vault(path: Path) -> Vault:
    """A new vault (a git repository) from the template at ``path``: `osk init`."""
    return init(path)
