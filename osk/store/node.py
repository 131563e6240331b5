"""The node contract (governance/nodes.md): one model, used by every reader and writer.

A node is a Markdown file whose title is its file name. Its front matter holds exactly the keys
of ``osk.store.contract.Frontmatter``; anything else is a contract error that names the file, the
key and what was expected. osk never rewrites a file it is not deliberately changing: a hand edit
that breaks the contract is reported by the validators, never "fixed".

The model (pydantic) and the YAML reader are imported on first use: a node restored from the
catalog snapshot carries its front matter as plain fields, so a process that only reads
unchanged nodes (a fresh ``osk search``) imports neither.
"""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
from collections.abc import Callable, Collection
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from osk.errors import ContractError
from osk.store import sources, trust_state
from osk.store.fsutil import sha256_text
from osk.store.vault import cluster_of, scope_of, space_of

if TYPE_CHECKING:
    from osk.store.contract import Frontmatter

# The contract's keys in the order they are written (``osk.store.contract.Frontmatter``'s, named
# here so reading a node needs no pydantic; a test keeps them equal), and those a node must have.
KEYS = ("id", "created", "updated", "author", "drafter", "summary", "derived-from", "conflicts",
        "trust", "valid_from", "valid_to", "supersedes")
REQUIRED_KEYS = ("id", "created", "updated", "author", "drafter", "summary")
# The keys osk sets itself: the id, the times, who wrote the change, the person's verdict.
SET_BY_OSK = ("id", "created", "updated", "author", "trust")


def field_name(key: str) -> str:
    """A front matter key as the field that carries it in a request (``derived-from`` ->
    ``derived_from``): the tool arguments, ``osk.calls.request`` and ``osk import`` lines."""
    return key.replace("-", "_")


# What a writer gives (create_node, update_node, an `osk import` line), as fields: the keys that
# are not osk's own. ``osk.calls.request``'s NewNode and NodeEdit carry each (a test keeps them).
WRITTEN_FIELDS = tuple(field_name(key) for key in KEYS if key not in SET_BY_OSK)


class Fields:
    """A node's front matter as plain fields, packed: its values in one tuple beside the key
    order it shares with every node that has the same keys, the few values many nodes repeat
    (author, drafter, trust; ``updated`` when it is ``created``) one string each. A dict a
    node and its own copies cost some 350 bytes a node more (35 MB at 100,000 restored or
    let-go nodes)."""

    __slots__ = ("_keys", "_values")

    def __init__(self, fields: dict[str, Any]) -> None:
        keys = tuple(fields)
        self._keys = _KEY_ORDERS.setdefault(keys, keys)
        values = [sys.intern(value) if key in _REPEATED and isinstance(value, str) else value
                  for key, value in fields.items()]
        if "created" in fields and fields.get("updated") == fields["created"]:
            values[keys.index("updated")] = fields["created"]
        self._values = tuple(values)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self._values[self._keys.index(key)]
        except ValueError:
            return default

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[self._keys.index(key)]
        except ValueError:
            raise KeyError(key) from None

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self._keys, self._values, strict=True))


_KEY_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}
_REPEATED = frozenset({"author", "drafter", "trust"})


def plain_record(fields: dict[str, Any], file_hash: str, body_hash: str) -> str:
    """A node's plain fields and hashes as one JSON object, ``{"meta":…,"file_hash":…,
    "body_hash":…}``: how a ``Spool`` keeps a node, and the tail of its catalog snapshot entry
    (which puts its stat and read time in front)."""
    return json.dumps({"meta": fields, "file_hash": file_hash, "body_hash": body_hash},
                      ensure_ascii=False, separators=(",", ":"))


class Spool:
    """The plain fields and hashes of the nodes a bulk load let go (``Node.let_text_go``),
    kept in an unnamed temporary file instead of memory: such a node holds one int, where its
    record lies (``plain_record``), and reads it back on each use (the last one read is kept).
    Held as Fields, its strings and two hex hashes, they cost some 700 bytes a node (70 MB at
    100,000 nodes of ``osk import``). Also the text's loader of the nodes it holds: ``reader``.
    The system removes the file when it is closed or the process is killed."""

    __slots__ = ("_reader", "_file", "_buffer", "_flushed", "_last", "__weakref__")

    def __init__(self, reader: Callable[[str], str], directory: str) -> None:
        import tempfile  # here: a bulk load's alone
        import weakref

        self._reader = reader
        self._file = tempfile.TemporaryFile(dir=directory)
        weakref.finalize(self, self._file.close)  # closed with the last node that uses it
        self._buffer = bytearray()  # records not written to the file yet
        self._flushed = 0  # the file's length
        self._last: tuple[int, tuple[Fields, str, str]] | None = None

    def __call__(self, rel: str) -> str:
        return self._reader(rel)

    def put(self, record: str) -> int:
        """Keep ``record``; returns its place (its offset and length in one int)."""
        data = record.encode("utf-8")
        at = self._flushed + len(self._buffer)
        self._buffer += data
        if len(self._buffer) >= _SPOOL_BUFFER:
            self._file.write(self._buffer)
            self._file.flush()
            self._flushed += len(self._buffer)
            self._buffer = bytearray()
        return at << 32 | len(data)

    def record(self, place: int) -> str:
        start, size = place >> 32, place & 0xFFFFFFFF
        if start >= self._flushed:
            start -= self._flushed
            return self._buffer[start:start + size].decode("utf-8")
        data = os.pread(self._file.fileno(), size, start)
        if len(data) != size:
            raise OSError(f"a node's record in the spool ended at {start + len(data)}")
        return data.decode("utf-8")

    def get(self, place: int) -> tuple[Fields, str, str]:
        """The fields and hashes kept at ``place``."""
        last = self._last
        if last is not None and last[0] == place:
            return last[1]
        data = json.loads(self.record(place))
        value = (Fields(data["meta"]), str(data["file_hash"]), str(data["body_hash"]))
        self._last = (place, value)
        return value


_SPOOL_BUFFER = 1 << 18  # bytes of records gathered before a write


class Node:
    """A node file: vault-relative POSIX ``path``, validated front matter, and its text.

    A node the catalog restored from its snapshot carries its hashes but not its text; the text
    is read on first use, so loading a large vault does not read every file. It may also carry
    its front matter as the snapshot's plain fields (``fields``, written from a validated model
    under this contract): the model is built on first use of ``meta``, which a search over
    50,000 nodes needs for its hits only. A node a bulk load let go keeps even those in a
    ``Spool`` (``_fields`` is then its place there, ``_loader`` the spool), read back on use.
    """

    __slots__ = ("path", "_meta", "_fields", "_text", "_body_start", "_loader", "_file_hash",
                 "_body_hash")

    def __init__(self, path: str, meta: Frontmatter | None, body: str | None = None,
                 text: str | None = None, *, loader: Callable[[str], str] | None = None,
                 file_hash: str | None = None, body_hash: str | None = None,
                 fields: dict[str, Any] | Fields | None = None) -> None:
        if text is None and loader is None:
            raise ValueError("a node needs its text or a way to read it")
        if meta is None and fields is None:
            raise ValueError("a node needs its front matter or the fields of it")
        self.path = path
        self._meta = meta
        self._fields: Fields | int | None = None if meta is not None or fields is None else \
            fields if isinstance(fields, Fields) else Fields(fields)
        self._text = text
        self._body_start = len(text) - len(body) if text is not None and body is not None else None
        self._loader = loader
        self._file_hash = file_hash
        self._body_hash = body_hash

    @property
    def meta(self) -> Frontmatter:
        meta = self._meta  # read once: ``let_text_go`` may clear it meanwhile
        if meta is None:
            from osk.store.contract import Frontmatter

            spooled = self._spooled()
            if spooled is not None:  # held from now on, as a node let go without a spool
                fields, self._file_hash, self._body_hash = spooled
            else:
                assert isinstance(self._fields, Fields)
                fields = self._fields
            meta = self._meta = Frontmatter.model_construct(**fields.as_dict())
            self._fields = None
        return meta

    def _plain(self) -> Fields:
        """The plain fields (read back from the spool, not kept, for a node let go to one)."""
        fields = self._fields
        if isinstance(fields, int):
            assert isinstance(self._loader, Spool)
            return self._loader.get(fields)[0]
        assert fields is not None
        return fields

    def _spooled(self) -> tuple[Fields, str, str] | None:
        """The fields and hashes of a node let go to a spool, read back; else None."""
        place = self._fields
        if not isinstance(place, int):
            return None
        assert isinstance(self._loader, Spool)
        return self._loader.get(place)

    @property
    def derived_from(self) -> list[str]:
        """The links the node cites (``meta.derived_from``), read from the plain fields when
        the model is not built: a pass over every citing node (the MCP server's first recheck
        count) built and kept a model a node, 121 MB at 100,000 nodes."""
        meta = self._meta
        if meta is not None:
            return list(meta.derived_from)
        return [str(link) for link in self._plain().get("derived_from", ())]

    def field(self, name: str, default: Any = None) -> Any:
        """One front matter field by its model name (``default`` where the file has none), from
        the model when it is built, else from the plain fields (a node restored from the
        catalog snapshot, or one whose text was let go): no model is built to ask."""
        meta = self._meta
        value = getattr(meta, name) if meta is not None else self._plain().get(name)
        return default if value is None else value

    def meta_fields(self) -> dict[str, Any]:
        """The front matter as plain fields (what the catalog snapshot stores)."""
        if self._fields is not None:
            return self._plain().as_dict()
        return self.meta.model_dump(exclude_none=True)

    def plain_record(self) -> str:
        """The plain fields and hashes as ``plain_record`` writes them (a spooled node's record
        as kept: the catalog snapshot copies it)."""
        place = self._fields
        if isinstance(place, int):
            assert isinstance(self._loader, Spool)
            return self._loader.record(place)
        return plain_record(self.meta_fields(), self.file_hash, self.body_hash)

    def __repr__(self) -> str:
        return f"Node({self.path!r}, id={self.meta.id!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return (self.path, self.meta, self.text) == (other.path, other.meta, other.text)

    __hash__ = None  # type: ignore[assignment]  # mutable caches inside; compare, never hash

    @property
    def text(self) -> str:
        text = self._text  # read once: ``let_text_go`` may clear it meanwhile
        if text is None:
            assert self._loader is not None
            text = self._text = self._loader(self.path)
        return text

    @property
    def text_held(self) -> bool:
        """Whether the text is in memory (read or written here), not still to be read."""
        return self._text is not None

    def holds(self, text: str) -> bool:
        """Whether this node was parsed from exactly ``text`` (without reading its file: by
        the text held, else by the file hash)."""
        if self._text is not None:
            return self._text == text
        file_hash = self._known_hashes()[0]
        return file_hash is not None and file_hash == sha256_text(text)

    def _known_hashes(self) -> tuple[str | None, str | None]:
        """(file hash, body hash) as known without the text: cached, or in the spool."""
        spooled = self._spooled()
        if spooled is not None:
            return spooled[1], spooled[2]
        return self._file_hash, self._body_hash

    def let_text_go(self, loader: Callable[[str], str], spool: Spool | None = None) -> None:
        """Drop the text and the front matter model held, keeping the plain fields and the
        hashes (``loader(path)`` reads the text again on use: one loader shared by every node
        of a catalog, where a closure a node held its own path and cell, some 340 bytes a node
        at 100,000): the form of a node restored from the
        catalog snapshot, for a node the catalog no longer expects to use soon. In place, so
        whoever holds this node (the catalog entry, the rechecks' view of it) lets go too.
        With a ``spool`` (a bulk load's), the fields and hashes go to it, and it reads the text.
        The catalog calls it under the engine's hold, as it changes its entries."""
        file_hash, body_hash = self.file_hash, self.body_hash  # while the text is here
        if spool is not None:
            place = spool.put(plain_record(self.meta_fields(), file_hash, body_hash))
            self._loader = spool
            self._fields = place
            self._file_hash = self._body_hash = None
        else:
            if self._meta is not None:
                self._fields = Fields(self._meta.model_dump(exclude_none=True))
            self._loader = loader
        self._text = None
        self._body_start = None  # of the text held: the file is read again on use
        self._meta = None

    def with_text(self, text: str) -> Node:
        """This node holding ``text``, which the caller read from its file and found to have
        this node's file hash: the same node, with no parse or validation again."""
        spooled = self._spooled()
        if spooled is not None:
            fields, file_hash, body_hash = spooled
            return Node(self.path, None, text=text, fields=fields, file_hash=file_hash,
                        body_hash=body_hash)
        held = self._fields
        return Node(self.path, self._meta, text=text,
                    fields=held if isinstance(held, Fields) else None,
                    file_hash=self._file_hash, body_hash=self._body_hash)

    @property
    def body(self) -> str:
        if self._body_start is None:
            self._body_start = len(self.text) - len(split_frontmatter(self.path, self.text)[1])
        return self.text[self._body_start:]

    @property
    def title(self) -> str:
        return title_from_path(self.path)

    @property
    def id(self) -> str:
        if self._meta is not None:
            return self._meta.id
        return str(self._plain()["id"])

    @property
    def trust_state(self) -> str:
        """confirmed / inferred (``osk.authority.trust``), read without building the model."""
        if self._meta is not None:
            return self._meta.trust_state
        fields = self._plain()
        return trust_state.state_of(fields.get("trust"), str(fields["author"]))

    @property
    def space(self) -> str | None:
        return space_of(self.path)

    @property
    def scope(self) -> str | None:
        return scope_of(self.path)

    @property
    def cluster(self) -> str | None:
        return cluster_of(self.path)

    @property
    def file_hash(self) -> str:
        """Hash of the whole file: what a compare-and-swap full replacement must name."""
        if self._file_hash is None:
            spooled = self._spooled()
            if spooled is not None:
                return spooled[1]
            self._file_hash = sha256_text(self.text)
        return self._file_hash

    @property
    def known_file_hash(self) -> str | None:
        """``file_hash`` when it is had without reading the file (cached, or the text held)."""
        if self._file_hash is not None or self._text is not None:
            return self.file_hash
        return self._known_hashes()[0]

    @property
    def body_hash(self) -> str:
        """Hash of the body: what citations bind to."""
        if self._body_hash is None:
            spooled = self._spooled()
            if spooled is not None:
                return spooled[2]
            self._body_hash = body_hash(self.body)
        return self._body_hash


def body_hash(body: str) -> str:
    return sha256_text(body)


def read_text(path: str | os.PathLike[str]) -> str:
    """A node file's text as every reader takes it (the catalog, a search from the store):
    UTF-8, line ends as they are, so its hash is the file's."""
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def title_from_path(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    stem = name[:-3] if name.endswith(".md") else PurePosixPath(name).stem
    return unicodedata.normalize("NFC", stem)


# -- parsing -------------------------------------------------------------------------------
def split_frontmatter(path: str, text: str, keys: Collection[str] | None = None
                      ) -> tuple[dict[str, Any], str]:
    """Split a node file into its front matter mapping and its body (verbatim), leaving out the
    sources section osk writes between them (``osk.store.sources``): it is not part of the body.
    ``keys``: only these are wanted (the mapping may hold more): front matter in osk's own form
    is then read for them alone, which needs no YAML for a value quoted as JSON."""
    header, body = _parts(path, text)
    fast = _canonical_header(header, keys)
    if fast is not None:
        return fast, body
    import yaml

    try:
        data = yaml.load(header, Loader=_yaml_loader()) if header.strip() else {}
    except yaml.YAMLError as exc:
        raise ContractError(f"{path}: front matter is not valid YAML ({exc})",
                            path=path, key=None, expected="YAML mapping") from exc
    if not isinstance(data, dict):
        raise ContractError(f"{path}: front matter must be a mapping of keys",
                            path=path, key=None, expected="YAML mapping")
    return data, body


def body_of(path: str, text: str) -> str:
    """The body ``split_frontmatter`` gives, without reading the front matter (no YAML)."""
    return _parts(path, text)[1]


def _parts(path: str, text: str) -> tuple[str, str]:
    """(front matter text, body without the sources section)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    first, sep, rest = text.partition("\n")
    if first.rstrip("\r") != "---" or not sep:
        raise ContractError(
            f"{path}: a node must start with a '---' front matter line",
            path=path, key=None, expected="front matter",
        )
    end = _closing_fence(rest)
    if end is None:
        raise ContractError(
            f"{path}: front matter is not closed by a '---' line",
            path=path, key=None, expected="closing ---",
        )
    return rest[: end[0]], sources.split(rest[end[1]:])[1]


def _closing_fence(rest: str) -> tuple[int, int] | None:
    position = 0
    for line in rest.splitlines(keepends=True):
        if line.rstrip("\r\n") == "---":
            return position, position + len(line)
        position += len(line)
    return None


_KEY_LINE = re.compile(r"^([a-z_-]+):(?: (.*))?$")
_ITEM_LINE = re.compile(r'^  - ("(?:[^"\\]|\\.)*"|[^"].*)$')


def _canonical_header(header: str, keys: Collection[str] | None = None
                      ) -> dict[str, Any] | None:
    """Read front matter written in the exact form ``render`` produces, without YAML.

    Loading a vault parses thousands of headers, and YAML costs ~40 µs each. This accepts only
    lines whose meaning YAML would read identically (``key: plain``, ``key: "json string"``,
    ``key: []``, ``key:`` followed by ``  - "item"`` lines); anything else returns None and the
    caller falls back to the YAML loader, so hand-written front matter is read exactly as before.
    A key not in ``keys`` (when given) is checked for that form but not read: its plain value
    needs only to be one scalar on its line, whatever YAML would resolve it to (the resolver
    table costs an import of YAML).
    """
    data: dict[str, Any] = {}
    seen: set[str] = set()
    open_list: list[str] | None = None
    opened: list[str] = []  # the keys read as ``key:``: null to YAML when no item follows
    for line in header.split("\n"):
        if not line:
            continue
        item = _ITEM_LINE.match(line)
        if item and open_list is not None:
            value = item.group(1)
            if value.startswith('"'):
                open_list.append(json.loads(value))
            elif _reads_as_string(value):  # ``render`` leaves a link such as file:a/b.py bare
                open_list.append(value)
            else:
                return None
            continue
        match = _KEY_LINE.match(line)
        if not match or match.group(1) in seen:
            return None
        key, value = match.group(1), match.group(2)
        seen.add(key)
        wanted = keys is None or key in keys
        into = data if wanted else {}
        open_list = None
        if value is None:
            open_list = into[key] = []
            opened.append(key)
        elif value == "[]":
            into[key] = []
        elif value.startswith('"'):
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError:
                return None
            if not isinstance(decoded, str):
                return None
            into[key] = decoded
        elif _reads_as_string(value) if wanted else _one_plain_scalar(value):
            into[key] = value
        else:
            return None
    for key in opened:  # an empty property, as Obsidian writes one: null, as YAML reads it
        if data.get(key) == []:
            data[key] = None
    return data


def parse(path: str, text: str) -> Node:
    """Parse and validate a node file; raise ContractError naming the file, key and expectation."""
    from osk.store.contract import validate_meta

    data, body = split_frontmatter(path, text)
    meta = validate_meta(path, data)
    return Node(path=path, meta=meta, body=body, text=text)


def parse_validated(path: str, text: str, file_hash: str) -> Node:
    """``parse(path, text)`` for a text that ``file_hash`` (its hash, which the caller checked)
    shows was validated before: the search index took it from a valid node. Its front matter in
    osk's own form is read as the plain fields, without the contract's model (pydantic's
    import and build cost a fresh process about 60 ms): the contract checks strings and lists
    of strings and changes none, so the model holds what that form says. Front matter in any
    other form, or with a key left empty (null, which the contract reads), is parsed and
    validated as ``parse`` does."""
    header, body = _parts(path, text)
    data = _canonical_header(header)
    if data is None or None in data.values():  # a key left empty: the contract's to read
        return parse(path, text)
    fields = {field_name(key): value for key, value in data.items()}
    return Node(path, None, body, text, fields=fields, file_hash=file_hash)


# -- rendering -----------------------------------------------------------------------------
def render(meta: Frontmatter, body: str) -> str:
    """The canonical text of a node osk writes: contract keys in order, the sources section
    (``osk.store.sources``), then the body."""
    data = meta.model_dump(by_alias=True)
    lines = ["---"]
    for key in KEYS:
        value = data.get(key)
        if value is None or (isinstance(value, list) and not value and key != "derived-from"):
            continue
        if isinstance(value, list):
            if not value:
                lines.append(f"{key}: []")
                continue
            lines.append(f"{key}:")
            lines.extend(f"  - {_scalar(item)}" for item in value)
        else:
            lines.append(f"{key}: {_scalar(value)}")
    lines.append("---")
    text_body = body if body.endswith("\n") or not body else body + "\n"
    section = sources.render(meta.derived_from, meta.conflicts, meta.supersedes)
    return "\n".join(lines) + "\n" + section + text_body


_PLAIN = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.:+\-/ ]*$")
_AMBIGUOUS = {"yes", "no", "true", "false", "null", "on", "off", "~", "y", "n"}


def _scalar(value: object) -> str:
    text = str(value)
    return text if _is_plain(text) else json.dumps(text, ensure_ascii=False)


def _is_plain(text: str) -> bool:
    """Whether osk writes ``text`` unquoted: YAML reads it back as this very string, and no
    other common YAML reader (Obsidian's YAML 1.2, for one) could take it for a boolean."""
    return _reads_as_string(text) and text.lower() not in _AMBIGUOUS


def _one_plain_scalar(text: str) -> bool:
    """Whether the unquoted ``text`` is one plain scalar on its line (what YAML resolves it
    to aside: a string, a number, a date)."""
    return bool(_PLAIN.match(text)) and not (
        text.endswith((" ", ":")) or ": " in text
        or " #" in text)  # "0:" ends a line as a mapping key, not a string


def _reads_as_string(text: str) -> bool:
    """Whether PyYAML reads the unquoted scalar ``text`` as exactly this string. A rare
    spelling of a YAML word that YAML would still read as a string ("yES") is answered
    False: the caller then quotes it, or reads the header with YAML."""
    if not _one_plain_scalar(text):
        return False
    if text[0].isascii() and text[0].isalpha():
        # Of YAML's patterns, those keyed on a letter are whole words (booleans, null), each
        # of them in _AMBIGUOUS: no import of YAML for a name, a model or a file: link.
        return text.lower() not in _AMBIGUOUS
    # YAML resolves a plain scalar to null, bool, int, float or timestamp by these patterns.
    return not any(pattern.match(text) for _tag, pattern in _resolvers().get(text[0], ()))


@cache
def _resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """YAML's patterns for plain scalars that resolve to null, bool, number or timestamp."""
    import yaml

    return yaml.SafeLoader.yaml_implicit_resolvers


@cache
def _yaml_loader() -> type:
    """libyaml's loader (about 10x faster on a cold index build), else PyYAML's own."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)

