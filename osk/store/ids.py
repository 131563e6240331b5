"""UUIDv7 identifiers, kept monotone within a ledger.

The standard library gains ``uuid.uuid7`` only in Python 3.14; this small generator keeps the hook
path free of a dependency and lets a ledger demand an id greater than every id it already holds,
even when two devices' clocks disagree.
"""

from __future__ import annotations

import os
import re
import time

from osk.errors import LimitError

#: The longest identifier osk accepts (a conversation or completion id, a session key, a host
#: name, a node reference, a coordinate). Real ones are under 200 characters; the cap keeps a
#: hostile one from costing time under a lock (a 300,000-character id once took 3.6 s).
MAX_IDENTIFIER_CHARS = 1000


def uuid7(after: str | None = None) -> str:
    """A new UUIDv7 string, strictly greater than ``after`` when one is given."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    candidate = _build(ms, rand >> 68 & 0xFFF, rand & ((1 << 62) - 1))
    if after is not None and candidate <= after:
        candidate = _successor(after)
    return candidate


def _build(ms: int, rand_a: int, rand_b: int) -> str:
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (rand_a & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand_b & ((1 << 62) - 1)
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _successor(previous: str) -> str:
    """The next UUIDv7 after ``previous``: same millisecond, counter bits incremented."""
    value = int(previous.replace("-", ""), 16)
    ms = value >> 80
    rand_a = (value >> 64) & 0xFFF
    rand_b = value & ((1 << 62) - 1)
    rand_b += 1 + (int.from_bytes(os.urandom(2), "big") & 0xFF)
    if rand_b >> 62:
        rand_b &= (1 << 62) - 1
        rand_a += 1
        if rand_a >> 12:
            rand_a = 0
            ms += 1
    return _build(ms, rand_a, rand_b)


# The canonical text of a UUID of version 7 and the RFC 4122 variant, as ``str(uuid.UUID(…))``
# writes it. Checked by pattern: the ``uuid`` module imports ``platform``, a few ms a fresh
# `osk search` (which reads the routing ledger) would pay for this one test.
_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def is_uuid7(text: str) -> bool:
    return isinstance(text, str) and _UUID7.fullmatch(text) is not None


def check_identifier(what: str, value: str) -> str:
    """``value``, refused with LimitError when it is longer than any identifier can be."""
    if isinstance(value, str) and len(value) > MAX_IDENTIFIER_CHARS:
        raise LimitError(
            f"{what} is {len(value):,} characters long; an identifier is at most "
            f"{MAX_IDENTIFIER_CHARS:,}", argument=what, length=len(value),
        )
    return value
