"""The mark of a background review's fork: the variable ``osk.hooks.growth`` sets in the
environment of the host CLI it forks, read by every hook (a forked session neither captures
nor counts). Its own module so that every hook reads it without importing growth, and growth
sets it without importing the hook entry.
"""

from __future__ import annotations

from collections.abc import Mapping

GROWTH_FORK_ENV = "OSK_GROWTH_FORK"


def in_growth_fork(env: Mapping[str, str]) -> bool:
    """True inside a background review fork (``osk.hooks.growth`` sets this variable in its
    environment, taking the name from here so that every hook reads it without importing growth).
    """
    return bool(env.get(GROWTH_FORK_ENV))
