"""A disk that refuses one chosen write, for a real osk process (tests/writes/test_disk_errors.py).

``install`` wraps ``os.write`` and ``os.replace``, the two calls every durable write in osk
ends in (appends to ledgers and records; atomic and cache replaces). Writing a number N to the
control file arms it: the Nth write into ``root`` from then on fails with ENOSPC, as a full disk
would refuse it, and the target's path is written to ``<control>.fired``. SQLite's writes (the
search index, a cache) do not pass through here, and neither are the catalog snapshot's saves
counted (``serve``): a cache saved when 30 s have passed, inside whichever call comes then,
would shift which write of that call is Nth, so a trial would skip the point it meant to try."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_uncounted = threading.local()  # set while a write of a timed cache runs (``serve``)


def install(control: Path, root: str) -> None:
    real_write, real_replace = os.write, os.replace
    armed: dict[str, int | None] = {"stamp": None, "left": 0}
    fired = control.with_name(control.name + ".fired")

    def refuses(target: str) -> bool:
        try:
            stamp = control.stat().st_mtime_ns
        except FileNotFoundError:
            return False
        if stamp != armed["stamp"]:
            armed["stamp"], armed["left"] = stamp, int(control.read_text())
        left = armed["left"] or 0
        if left <= 0 or not target.startswith(root) or getattr(_uncounted, "on", False):
            return False
        armed["left"] = left - 1
        if left > 1:
            return False
        fired.write_text(target)  # a file object: not through the wrapped os.write
        return True

    def write(fd: int, data: bytes) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if refuses(target):
            raise OSError(errno.ENOSPC, "No space left on device", target)
        return real_write(fd, data)

    def replace(src: str, dst: str, **kwargs: object) -> None:
        if refuses(os.path.realpath(os.fspath(dst))):
            raise OSError(errno.ENOSPC, "No space left on device", os.fspath(dst))
        real_replace(src, dst, **kwargs)  # type: ignore[arg-type]

    os.write, os.replace = write, replace  # type: ignore[assignment]


def uncounted(save: Callable[..., Any]) -> Callable[..., Any]:
    """``save`` with none of its writes counted or refused."""
    def run(*args: Any, **kwargs: Any) -> Any:
        _uncounted.on = True
        try:
            return save(*args, **kwargs)
        finally:
            _uncounted.on = False
    return run


def serve(control: str, root: str, *args: str) -> int:
    """``osk ARGS`` with the shim installed (the test's server command)."""
    install(Path(control), os.path.realpath(root))
    from osk.store.catalog import Catalog
    from osk.surfaces.cli import main

    Catalog.save_snapshot = uncounted(Catalog.save_snapshot)  # type: ignore[method-assign]

    return main(list(args))
