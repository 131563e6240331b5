"""Host adapters, one module per host, each exposing ``ADAPTER``
(see ``osk.hooks.adapter_contract``).

Only the adapter a hook names is imported, so a hook pays for one host. A fifth host is a new
module here plus its name in ``HOSTS``; docs/hosts.md lists what it must provide and verify.
"""

from __future__ import annotations

import importlib

from osk.hooks.adapter_contract import Adapter

HOSTS: tuple[str, ...] = ("claude", "codex", "kiro", "antigravity")


class UnknownHost(ValueError):
    pass


def get(host: str) -> Adapter:
    if host not in HOSTS:
        raise UnknownHost(f"unknown host {host!r}; osk hooks know {', '.join(HOSTS)}")
    module = importlib.import_module(f"osk.hooks.adapters.{host}")
    adapter: Adapter = module.ADAPTER
    return adapter
