"""Which node files of a tree carry which id, read through this device's map of node-file
blobs to the ids they carry (``.osk/sync/node-ids``).

Before a pull lands, admission asks which id every node file of the remote's tree carries: an
id brought that another file carries too would make a node unreadable. After the rebase it
asks the same of the node files this device's unpushed commits change (``blob_ids``).

A blob's id never changes, so the map is keyed by git's object name and an entry stays right
as long as it is kept: a pull reads the node files this device has not met before, not every
one of the tree (at 100,000 nodes, git reading every node blob to find the brought ids cost
2.1 s a pull).

An id is read as the catalog reads it (``split_frontmatter``; ``is_valid_id``, the contract's
rule), so ids are compared as the catalog compares them: any form, case and all. The map keeps
the blobs of the last tree asked about. It is device state (never synced), written whole and
atomically when it changed; a map missing, or a line that is no entry, costs only blobs read
again.

Format: a line a blob, its object name in hex, then a space and the id it carries, or the name
alone for a node file that carries no valid id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from osk.errors import ContractError
from osk.store.conflict_copies import is_node_path
from osk.store.contract import is_valid_id
from osk.store.fsutil import atomic_write
from osk.store.node import split_frontmatter
from osk.store.vault import Vault
from osk.sync.gitrepo import GitRepo, split_z

# A whole line (a line cut off at the end of the file has no newline: it is no entry).
_ENTRY = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})(?: ([^\n]+))?\n", re.MULTILINE)


def carried_ids(vault: Vault, repo: GitRepo, tree: str) -> dict[str, str | None]:
    """Each node file of ``tree`` (a commit or tree) with the valid id it carries (None for a
    file that carries none)."""
    files: dict[str, str] = {}  # node file -> blob
    for entry in split_z(repo.run("ls-tree", "-r", "-z", tree).out):
        meta, rel = entry.split("\t", 1)
        _mode, kind, sha = meta.split()
        if kind == "blob" and is_node_path(rel):
            files[rel] = sha
    known = _load(vault)
    kept = {sha: known[sha] for sha in files.values() if sha in known}
    kept.update(_read_ids(repo, {sha: rel for rel, sha in files.items() if sha not in kept}))
    if kept != known:
        _save(vault, kept)
    return {rel: kept[sha] for rel, sha in files.items()}


def blob_ids(repo: GitRepo, blobs: dict[str, str]) -> dict[str, str | None]:
    """Each node file of ``blobs`` (node file -> blob) with the valid id it carries, read from
    git, not through the map: for the few files a rebase changed, which no tree asked about
    holds yet."""
    read = _read_ids(repo, {sha: rel for rel, sha in blobs.items()})
    return {rel: read[sha] for rel, sha in blobs.items()}


def holders(files: Mapping[str, str | None]) -> dict[str, list[str]]:
    """The node files of ``files`` by the id each carries; a file carrying none is left out."""
    found: dict[str, list[str]] = {}
    for rel, node_id in files.items():
        if node_id is not None:
            found.setdefault(node_id, []).append(rel)
    return found


def _read_ids(repo: GitRepo, wanted: dict[str, str]) -> dict[str, str | None]:
    """Each blob of ``wanted`` (blob -> a node file holding it) with the id it carries."""
    return {sha: _id_of(wanted[sha], data) for sha, data in repo.blobs(list(wanted))}


def _id_of(rel: str, data: bytes) -> str | None:
    """The valid id node file ``rel`` (its bytes ``data``) carries, as the catalog reads it;
    else None."""
    try:
        fields, _body = split_frontmatter(rel, data.decode("utf-8"), ("id",))
    except (UnicodeDecodeError, ContractError):
        return None
    value = fields.get("id")
    return value if is_valid_id(value) else None


def _load(vault: Vault) -> dict[str, str | None]:
    """The map as saved; a line that is no entry (the file damaged) is left out."""
    try:
        text = vault.state("sync", "node-ids").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return {found[1]: found[2] for found in _ENTRY.finditer(text)
            if found[2] is None or is_valid_id(found[2])}


def _save(vault: Vault, kept: dict[str, str | None]) -> None:
    lines = [sha if node_id is None else f"{sha} {node_id}" for sha, node_id in kept.items()]
    atomic_write(vault.state("sync", "node-ids"), "".join(line + "\n" for line in lines),
                 temp_dir=vault.temp_dir)
