"""Tombstones: a claim the person rejected stays rejected.

``osk reject NODE --reason …`` (a person at a terminal) takes the node out of the live set: its
text is kept as an object, the file is removed from its Space, and a tombstone is appended to
``_ledger/tombstones.jsonl``. The tombstone is keyed on the claim, not on the file:

- ``key``: sha256 of the normalised title and the normalised body, and
- ``content``: sha256 of the normalised body alone (when the body is not empty),

where normalising is NFC, case folding, and collapsing every run of whitespace to one space. A
later write whose title and body, or whose body alone, normalise to a tombstone's is refused
with the tombstone's reason and date (``check``). Matching is exact after normalisation: a
reworded claim is a different claim and is not caught.

The person lifts a tombstone with ``osk lift KEY``; the rejected text stays in the object store
(``osk show``), and the claim may then be written again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from osk.errors import OskError, TombstoneError
from osk.store import clock
from osk.store.edges import node_title
from osk.store.fsutil import sha256_text
from osk.store.ledger import Ledger, LedgerView
from osk.store.titles import title_key
from osk.store.vault import Vault

TOMBSTONES = "tombstones"
MIN_PREFIX = 6


def normalise(text: str) -> str:
    """Compared as titles are (``title_key``: NFC, case folded), with whitespace runs folded."""
    return " ".join(title_key(text).split())


def claim_key(title: str, body: str) -> str:
    return sha256_text(f"osk-claim\0{normalise(title)}\0{normalise(body)}")


def content_key(body: str) -> str | None:
    norm = normalise(body)
    return sha256_text(f"osk-content\0{norm}") if norm else None


@dataclass(frozen=True)
class Tombstone:
    key: str
    content: str | None
    title: str
    reason: str
    time: str  # when the person rejected it (vault clock)
    node_id: str
    path: str
    object: str | None  # the rejected file's text, in _objects/
    lifted: bool = False
    forked: bool = False  # devices disagree (one rejected, one lifted): treated as active


def _tombstone(view: LedgerView, subject: str) -> Tombstone | None:
    tops = view.maxima(subject)
    rejects = [r for r in tops if r.kind == "reject"]
    source = max(rejects, key=lambda r: r.id) if rejects else None
    if source is None:  # only lifts on top: find the reject they lifted
        earlier = [r for r in view.for_subject(subject) if r.kind == "reject"]
        if not earlier:
            return None
        source = max(earlier, key=lambda r: r.id)
    data = source.data
    return Tombstone(
        key=subject,
        content=_str(data.get("content")),
        title=str(data.get("title", "")),
        reason=str(data.get("reason", "")),
        time=str(data.get("time", source.at)),
        node_id=str(data.get("node_id", "")),
        path=str(data.get("path", "")),
        object=_str(data.get("object")),
        lifted=not rejects,
        forked=len({r.kind for r in tops}) > 1,
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


_cache: dict[Path, tuple[tuple[int, int, int], list[Tombstone]]] = {}


def all_tombstones(vault: Vault) -> list[Tombstone]:
    """Every tombstone ever recorded (lifted ones included), oldest first."""
    path = vault.ledger_path(TOMBSTONES)
    try:
        st = path.stat()
    except FileNotFoundError:
        return []
    key = (st.st_size, st.st_mtime_ns, st.st_ino)
    cached = _cache.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    view = Ledger(vault, TOMBSTONES).read()
    found = [t for s in list(view.subjects()) if (t := _tombstone(view, s)) is not None]
    found.sort(key=lambda t: (t.time, t.key))
    _cache[path] = (key, found)
    return found


def active(vault: Vault) -> list[Tombstone]:
    return [t for t in all_tombstones(vault) if not t.lifted]


def check(vault: Vault, title: str, body: str) -> None:
    """Refuse a write whose claim (title and body, or body alone) the person rejected."""
    tombstones = active(vault)
    if not tombstones:
        return
    key, content = claim_key(title, body), content_key(body)
    for tomb in tombstones:
        if tomb.key == key or (content is not None and tomb.content == content):
            raise TombstoneError(
                f"this claim was rejected by the person on {tomb.time} (as {tomb.title!r}): "
                f"{tomb.reason}. Do not write it again; if the facts changed, write the new "
                f"claim in different words, or ask the person to lift the tombstone "
                f"(`osk lift {tomb.key[:12]}`)",
                key=tomb.key, reason=tomb.reason, date=tomb.time, title=tomb.title,
            )


def find(vault: Vault, prefix: str, *, lifted: bool = False) -> Tombstone:
    prefix = prefix.strip().lower()
    if len(prefix) < MIN_PREFIX:
        raise OskError(f"give at least {MIN_PREFIX} characters of the tombstone key "
                       f"(`osk tombstones` lists them)")
    pool = all_tombstones(vault) if lifted else active(vault)
    matches = [t for t in pool if t.key.startswith(prefix)]
    if not matches:
        raise OskError(f"no active tombstone key starts with {prefix!r}; `osk tombstones` "
                       f"lists them", key=prefix)
    if len(matches) > 1:
        raise OskError(f"{len(matches)} tombstones start with {prefix!r}; give more of the key",
                       key=prefix)
    return matches[0]


@dataclass(frozen=True)
class Aftermath:
    """What a rejection leaves behind in the live set, for the person to look at."""

    twins: tuple[str, ...]  # live nodes carrying the same claim (their next edit is refused)
    citing: tuple[str, ...]  # live nodes whose derived-from names the rejected node


def aftermath(vault: Vault, tomb: Tombstone) -> Aftermath:
    from osk.store.catalog import Catalog

    catalog = Catalog(vault)
    catalog.refresh()
    wanted = title_key(tomb.title)
    twins, citing = [], []
    for item in catalog.nodes():
        if claim_key(item.title, item.body) == tomb.key or (
            tomb.content is not None and content_key(item.body) == tomb.content
        ):
            twins.append(item.path)
        cited = (node_title(link) for link in item.meta.derived_from)
        if any(title is not None and title_key(title) == wanted for title in cited):
            citing.append(item.path)
    return Aftermath(tuple(sorted(twins)), tuple(sorted(citing)))


# -- the person's verbs ------------------------------------------------------------------------
def reject(vault: Vault, ref: str, *, reason: str) -> Tombstone:
    """Take a node out of the live set and tombstone its claim (person, terminal)."""
    from osk.authority import approvals, audit, protection
    from osk.store import node, objects
    from osk.store.catalog import Catalog
    from osk.store.fsutil import fsync_dir

    protection.require_person("reject")
    if not reason.strip():
        raise OskError("say why the claim is rejected: --reason TEXT (agents read it when a "
                       "write is refused)")
    with approvals.mutation_lock(vault):
        catalog = Catalog(vault)
        catalog.refresh()
        found = catalog.get(ref)
        protection.check_writable(vault, found.path)
        path = vault.abs(found.path)
        text = path.read_text(encoding="utf-8")
        current = node.parse(found.path, text)
        sha = objects.put(vault, text)
        tomb = Tombstone(
            key=claim_key(current.title, current.body), content=content_key(current.body),
            title=current.title, reason=reason.strip(), time=clock.now_text(),
            node_id=current.id, path=found.path, object=sha,
        )
        Ledger(vault, TOMBSTONES).append("reject", tomb.key, {
            "title": tomb.title, "content": tomb.content, "reason": tomb.reason,
            "time": tomb.time, "node_id": tomb.node_id, "path": tomb.path, "object": sha,
        })
        intent = audit.intend(vault, [audit.Change(
            "user", "reject", current.id, found.path, text, None,
            {"tombstone": tomb.key, "reason": tomb.reason})])
        path.unlink()
        fsync_dir(path.parent)
        intent.record()
        approvals.record_person_write(vault, found.path, None)
    return tomb


def lift(vault: Vault, prefix: str, *, reason: str = "") -> Tombstone:
    """Lift a tombstone so its claim may be written again (person, terminal)."""
    from osk.authority import approvals, audit, protection

    protection.require_person("lift")
    with approvals.mutation_lock(vault):
        tomb = find(vault, prefix)
        data = {"time": clock.now_text(), "reason": reason.strip()}
        Ledger(vault, TOMBSTONES).append("lift", tomb.key, data)
        audit.record(vault, actor="user", action="lift", node_id=tomb.node_id or tomb.key,
                     path=tomb.path, before=None, after=None,
                     detail={"tombstone": tomb.key, "reason": reason.strip()})
    return tomb
