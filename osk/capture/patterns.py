"""Regular expressions compiled on their first use.

Every hook process imports the secret filter and the fence's patterns, and compiling them all
cost a hook about 20 ms; most texts never reach most of them (a detector runs only when its
needle occurs, the steering check runs on node writes). ``lazy`` returns an object that
behaves as the compiled pattern (every attribute and method is the pattern's) and compiles it
when one is first asked for. Standard library only (hook path).
"""

from __future__ import annotations

import re
from typing import Any, cast


class _Lazy:
    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:  # only for what the slots do not hold
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self._source, self._flags)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source!r}, {self._flags})"


def lazy(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)``, done when the pattern is first used. Not for the ``re``
    module's functions (``re.sub(pattern, …)``), which want the compiled pattern itself."""
    return cast("re.Pattern[str]", _Lazy(source, flags))
