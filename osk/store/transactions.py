"""One write transaction on an SQLite connection: the rule every store of osk writes by.

The recall file, the rounds' index and the recheck store each change many rows at once and
must never keep half of a change. A block inside ``immediate`` is committed when it ends and
rolled back whole when it raises. SQLite itself ends the transaction on some errors (a full
disk, an I/O error); a second rollback would then fail with "cannot rollback - no transaction
is active" and hide the error that happened, which is what callers tell apart (a full disk
leaves a cache behind, a damaged file is rebuilt: ``osk.store.vault.disk_error``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook path opens no connection it does not need: sqlite3 is not imported
    import sqlite3


def busy(exc: BaseException) -> bool:
    """A writer's failure that only means another writer held the file (or its lock) too
    long: the store is whole, and the change goes with a later transaction."""
    from osk.errors import LockTimeout

    return isinstance(exc, LockTimeout) or (
        type(exc).__name__ == "OperationalError" and type(exc).__module__ == "sqlite3"
        and "locked" in str(exc))


@contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (writers one at a time, readers go on), then ``COMMIT``; when the
    block or the commit raises, ``ROLLBACK`` while the transaction is still open. ``db`` is in
    autocommit mode (``isolation_level=None``), so the transaction is this one."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # a COMMIT that failed may leave it open: a kept connection
            db.execute("ROLLBACK")  # would refuse every later BEGIN
        raise
