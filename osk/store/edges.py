"""Edge targets and their link syntax (governance/nodes.md, "Edges").

Edges are written as Obsidian links so the graph view shows provenance:

- ``[[Title]]``                          another node (titles are unique vault-wide)
- ``[[_raw/KEY/CONVERSATION#Round N]]``  one round of a raw conversation record
- ``[[file:relative/path]]``             a file in the project the session works in

A node's front matter holds a file citation as plain ``file:relative/path`` (``written``):
Obsidian reads every ``[[…]]`` in a list property as a link to a note, and no note can be named
``file:…``. ``parse_target`` reads both forms.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import PurePosixPath

from osk.errors import EdgeError, RawRecordError
from osk.store.fastclass import dataclass
from osk.store.ids import check_identifier

RAW_PREFIX = "_raw/"
FILE_PREFIX = "file:"
_RAW = re.compile(r"^_raw/(?P<key>[^/#]+)/(?P<conv>[^/#]+)#Round (?P<n>[1-9][0-9]*)$")
# A whole record as ``raw_record`` names it, or its file's vault path (``….md``).
RAW_RECORD = re.compile(r"^_raw/(?P<key>[^/#]+)/(?P<conv>[^/#]+?)(?:\.md)?$")


def raw_record(key: str, conversation: str) -> str:
    """``_raw/KEY/CONVERSATION``: how coordinates, reminders and manifests name a raw record."""
    return f"{RAW_PREFIX}{key}/{conversation}"


MAX_NAME_BYTES = 120  # a record's folder or file name, in UTF-8
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
             *(f"LPT{i}" for i in range(1, 10))}


def record_name(text: str) -> str:
    """A session key or host conversation id as a portable file name (idempotent).

    Names made of letters, digits, ``_``, ``.`` and ``-`` (starting with a letter, digit or
    ``_``) are kept as they are; anything else is cleaned and suffixed with 8 hex digits of the
    original's sha256, so two different ids never share a record.
    """
    if not isinstance(text, str) or not text.strip():
        raise RawRecordError("a raw record needs a non-empty session key and conversation id")
    check_identifier("a session key or conversation id", text)
    nfc = unicodedata.normalize("NFC", text)
    if _portable_name(nfc) and nfc == text:
        return nfc
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    cleaned = re.sub(r"[^\w.-]+", "-", nfc).strip(".-")
    budget = MAX_NAME_BYTES - 9
    cleaned = cleaned.encode("utf-8")[:budget].decode("utf-8", "ignore").rstrip(".-")
    return f"{cleaned}-{digest[:8]}" if cleaned else digest[:16]


def _portable_name(name: str) -> bool:
    return (bool(re.fullmatch(r"\w[\w.-]*", name)) and not name.endswith(".")
            and len(name.encode("utf-8")) <= MAX_NAME_BYTES
            and name.split(".")[0].upper() not in _RESERVED)


@dataclass(frozen=True)
class NodeTarget:
    title: str

    @property
    def link(self) -> str:
        return f"[[{self.title}]]"


@dataclass(frozen=True)
class RawTarget:
    key: str
    conversation: str
    round: int

    @property
    def record_path(self) -> str:
        return f"{raw_record(self.key, self.conversation)}.md"

    @property
    def coordinate(self) -> str:
        return f"{raw_record(self.key, self.conversation)}#Round {self.round}"

    @property
    def link(self) -> str:
        return f"[[{self.coordinate}]]"


@dataclass(frozen=True)
class FileTarget:
    path: str

    @property
    def link(self) -> str:
        return f"[[{FILE_PREFIX}{self.path}]]"


Target = NodeTarget | RawTarget | FileTarget


def written(link: str) -> str:
    """How a node's front matter holds ``link``: a file citation as ``file:PATH``, any other as
    the link itself."""
    if link.startswith(f"[[{FILE_PREFIX}") and link.endswith("]]"):
        return link[2:-2]
    return link


def as_link(written_link: str) -> str:
    """A front-matter citation as the tools take and give it: ``[[…]]`` (``written`` undone)."""
    if written_link.startswith(FILE_PREFIX):
        return f"[[{written_link}]]"
    return written_link


def in_git_folder(path: str) -> bool:
    """A path under a ``.git`` folder at any depth (a submodule's too): Git's own files, never
    project content; its config may hold a token in a remote URL. Nothing reads or cites it."""
    return any(part.casefold() == ".git" for part in PurePosixPath(path).parts)


def parse_target(text: str) -> Target:
    """Parse a link (``[[…]]``) or a bare coordinate/title into a target."""
    check_identifier("a link or coordinate", text)
    inner = text[2:-2] if text.startswith("[[") and text.endswith("]]") else text
    inner = inner.strip()
    if not inner:
        raise EdgeError("an empty edge target; give a node title, a raw coordinate or file:PATH")
    if inner.startswith(RAW_PREFIX):
        match = _RAW.match(inner)
        if not match:
            raise EdgeError(
                f"raw coordinate {inner!r} is malformed; expected _raw/KEY/CONVERSATION#Round N"
            )
        return RawTarget(match["key"], match["conv"], int(match["n"]))
    if inner.startswith(FILE_PREFIX):
        rel = inner[len(FILE_PREFIX):]
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or ".." in pure.parts or "\\" in rel:
            raise EdgeError(
                f"file target {rel!r} must be a relative path inside the project "
                f"(no leading '/', no '..')"
            )
        return FileTarget(pure.as_posix())
    if "#" in inner or "|" in inner or "[" in inner or "]" in inner:
        raise EdgeError(
            f"node target {inner!r} may not contain '#', '|', '[' or ']'; "
            f"cite the node by its title"
        )
    return NodeTarget(inner)


def node_title(link: str) -> str | None:
    """The title ``link`` cites when it names a node; None for raw rounds, project files and
    malformed links (``osk validate`` reports those)."""
    try:
        target = parse_target(link)
    except EdgeError:
        return None
    return target.title if isinstance(target, NodeTarget) else None


# A node's text stating which node it replaces: "Supersedes "Old title"", "replaces [[Old]]",
# or in Korean "[[Old]]를 대체" / ""Old" 결정을 대체". The title is quoted or linked, so prose
# that merely uses the word names nothing; "superseded by" and "replaced by" point the other way
# and do not match. Markdown emphasis around the verb is allowed ("**Supersedes** ...").
_VERBS = ("supersedes", "replaces")
_KOREAN_VERB = "대체"
_QUOTED = (r'(?:"(?P<{0}q>[^"\n]{{1,200}})"|“(?P<{0}c>[^”\n]{{1,200}})”'
           r"|\[\[(?P<{0}w>[^\]\n]{{1,200}})\]\])")
_STATED_SUPERSEDES = re.compile(
    rf"(?i:\b(?:{'|'.join(_VERBS)}))[*_]*\s*:?\s*" + _QUOTED.format("en")
    + "|" + _QUOTED.format("ko") + rf'[^"“”\[\]\n]{{0,12}}?{_KOREAN_VERB}')


def stated_supersedes(body: str) -> str | None:
    """What a node's body says the node supersedes (its first such statement, as written:
    a title, or a link's inside), or None.

    Search ranks a node whose text says so as the successor of the node it names, as it ranks
    one whose ``supersedes`` key names it: writers and people often say it only in prose. Only
    the key closes the old node's validity (``osk.authority.validity``)."""
    # Every node is read through here when it is indexed: the words first, which most bodies
    # lack, cost an eighth of the pattern's search.
    folded = body.lower()
    if _KOREAN_VERB not in body and not any(verb in folded for verb in _VERBS):
        return None
    match = _STATED_SUPERSEDES.search(body)
    if match is None:
        return None
    return next(value for value in match.groups() if value is not None)
