"""Content-addressed objects: every approved snapshot and every audited version of a node.

An object is the UTF-8 text of one file version, stored once under ``_objects/<aa>/<sha256>``
where ``sha256`` is the hash of those bytes (the same value as ``Node.file_hash``), so an audit
record's ``before``/``after`` and an approval's ``approved`` are also object names. Objects are
synced with the vault: a version recorded on one device can be shown on another.

Writes are atomic (temp file, fsync, rename) and idempotent: two writers of one version write
the same bytes to the same name. Reads check the bytes against their name, so a damaged object is
reported rather than served. Standard library only (the hook path may read objects).
"""

from __future__ import annotations

import re
from pathlib import Path

from osk.errors import ObjectMissing
from osk.store.fsutil import sha256_bytes
from osk.store.vault import Vault

_SHA = re.compile(r"^[0-9a-f]{64}$")


def is_sha(text: object) -> bool:
    return isinstance(text, str) and bool(_SHA.match(text))


def path_of(vault: Vault, sha: str) -> Path:
    if not is_sha(sha):
        raise ObjectMissing(f"{sha!r} is not an object name (64 lowercase hex digits)", sha=sha)
    return vault.inside(vault.objects_dir / sha[:2] / sha)


def put(vault: Vault, text: str) -> str:
    """Store ``text`` (if not already stored) and return its sha256."""
    return store(vault, text)[0]


def store(vault: Vault, text: str) -> tuple[str, bool]:
    """``put``, and whether the object is new (False: a file of its name was there, even one
    this call rewrote because its size was wrong)."""
    data = text.encode("utf-8")
    sha = sha256_bytes(data)
    path = path_of(vault, sha)
    try:
        if path.stat().st_size == len(data):
            return sha, False  # already stored; the name is the content: equal size is done
        new = False
    except FileNotFoundError:
        new = True
    vault.write_file(path, data)
    return sha, new


def has(vault: Vault, sha: str) -> bool:
    return is_sha(sha) and path_of(vault, sha).is_file()


def get(vault: Vault, sha: str) -> str:
    """The text stored under ``sha``; refuses a missing or damaged object."""
    path = path_of(vault, sha)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ObjectMissing(
            f"object {sha} is not in {vault.rel(vault.objects_dir)}/ (never stored on this "
            f"device, or not yet synced); run `osk sync` or restore it from Git history",
            sha=sha,
        ) from None
    if sha256_bytes(data) != sha:
        raise ObjectMissing(
            f"object {sha} is damaged (its bytes no longer match its name); restore "
            f"{vault.rel(path)} from Git history",
            sha=sha,
        )
    return data.decode("utf-8")
