"""Timestamps as the vault writes them: ISO 8601, minute precision, with the writer's offset.

The reference design fixes one time zone; osk writes the local offset of the device that wrote
the value and compares values as aware datetimes, so a vault reads the same anywhere.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, timezone

_MINUTE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(Z|[+-]\d{2}:\d{2})$")


def now() -> datetime:
    """The current time with the local offset, truncated to the minute.

    ``OSK_NOW`` (an ISO 8601 value) pins the clock for tests and demos.
    """
    pinned = os.environ.get("OSK_NOW")
    if pinned:
        return parse(pinned)
    return datetime.now().astimezone().replace(second=0, microsecond=0)


def format_minute(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must carry a UTC offset")
    return moment.replace(second=0, microsecond=0).isoformat(timespec="minutes")


def now_text() -> str:
    return format_minute(now())


def is_minute_timestamp(text: str) -> bool:
    return bool(_MINUTE.match(text))


def parse(text: str) -> datetime:
    """Parse an ISO 8601 value; a value without an offset is refused, never guessed."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no UTC offset")
    return value


def utc_now_precise() -> str:
    """Second-precision UTC time for ledger and log records (ordering comes from ids)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = [
    "UTC",
    "datetime",
    "format_minute",
    "is_minute_timestamp",
    "now",
    "now_text",
    "parse",
    "timedelta",
    "timezone",
    "utc_now_precise",
]
