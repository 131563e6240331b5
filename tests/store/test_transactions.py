"""One write transaction on an SQLite connection (``osk.store.transactions.immediate``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from writekit import sqlite_disk_full

from osk.store.transactions import immediate
from osk.store.vault import disk_error


def table(path: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("CREATE TABLE t (v TEXT)")
        with immediate(db):
            db.execute("INSERT INTO t VALUES ('kept')")


def rows(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return [v for (v,) in db.execute("SELECT v FROM t")]


def test_a_block_is_committed_when_it_ends_and_rolled_back_whole_when_it_raises(tmp_path):
    path = tmp_path / "store.sqlite"
    table(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        with pytest.raises(KeyError), immediate(db):
            db.execute("INSERT INTO t VALUES ('half')")
            raise KeyError("a change that cannot be finished")
        assert not db.in_transaction
    assert rows(path) == ["kept"]


def test_a_full_disk_is_the_error_raised_though_sqlite_ended_the_transaction_itself(tmp_path):
    path = tmp_path / "store.sqlite"
    table(path)
    with sqlite_disk_full(path.name), closing(sqlite3.connect(path, isolation_level=None)) as db:
        with pytest.raises(sqlite3.OperationalError) as raised, immediate(db):
            db.execute("INSERT INTO t VALUES ('first')")
            db.executemany("INSERT INTO t VALUES (?)", [("x" * 2000,)] * 50)  # pages it lacks
    assert str(raised.value) == "database or disk is full"  # not "cannot rollback - ..."
    assert disk_error(raised.value) is not None
    assert rows(path) == ["kept"]


def test_a_commit_that_fails_is_rolled_back_and_the_connection_takes_the_next_one(tmp_path):
    path = tmp_path / "store.sqlite"
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        db.execute("CREATE TABLE child (parent INTEGER REFERENCES parent (id) "
                   "DEFERRABLE INITIALLY DEFERRED)")
        with pytest.raises(sqlite3.IntegrityError), immediate(db):  # checked at COMMIT
            db.execute("INSERT INTO child VALUES (7)")
        assert not db.in_transaction
        with immediate(db):  # a kept connection goes on
            db.execute("INSERT INTO parent VALUES (7)")
            db.execute("INSERT INTO child VALUES (7)")
        assert db.execute("SELECT parent FROM child").fetchall() == [(7,)]
