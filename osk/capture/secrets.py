"""The secret filter (governance/raw.md, rule 3 "Secret filter").

Every raw append, every scope memory write and every node write (body and summary; a title is
checked, see ``check_title``) passes through ``mask_secrets`` first. A secret is
replaced by a marker that names its kind, ``[REDACTED:github-token]``; in an assignment only the
value is replaced, so ``password=[REDACTED:password]`` still reads as what it was.

The filter is a set of detectors. Each finds spans of the text that hold a secret; overlapping
spans merge into one, named by the most specific detector among them. Two promises shape every
rule below:

- recall on what people actually paste: key blocks, cloud and service tokens, JWTs, credentials
  in headers, URLs, env files, JSON, YAML, INI files and command lines;
- precision on ordinary code and prose: ``password_hash = hash(pw)``, ``token_count = 3``,
  ``if token == None``, ``def f(password: str)``, hashes, UUIDs and base64 blobs pass through
  byte for byte. Where the two conflict (an unquoted value in code that may be a variable name),
  a value is redacted only when it does not look like an identifier.

Redaction is idempotent: no detector matches a marker, so filtering twice equals filtering once.
Standard library only: this module is on the hook path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from functools import cache

from osk.capture.secret_detectors import DETECTORS
from osk.capture.secret_values import (
    MARKER,
)
from osk.store.fastclass import dataclass


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Masked:
    """The filtered text and what was removed: ``findings`` is ``[(kind, count)]`` by kind."""

    text: str
    findings: list[tuple[str, int]]

    @property
    def changed(self) -> bool:
        return bool(self.findings)

    @property
    def count(self) -> int:
        return sum(count for _, count in self.findings)


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    kind: str
    rank: int  # lower is more specific; names a merged span


def merged_findings(*results: Masked) -> tuple[tuple[str, int], ...]:
    """The findings of several filtered texts as one ``((kind, count), …)``, by kind."""
    counts: Counter[str] = Counter()
    for result in results:
        counts.update(dict(result.findings))
    return tuple(sorted(counts.items()))


def check_title(title: str) -> None:
    """Refuse a title that holds a secret. A title is the node's file name and its link target,
    committed and synced with it; a marker's brackets and colon cannot be in a portable file
    name, and a node named after a marker helps nobody, so the writer chooses another title.
    The refusal names the kind, never the title (it holds the secret)."""
    kinds = _kinds_in(title)
    if kinds:
        from osk.errors import TitleError

        raise TitleError(
            f"the title holds what looks like a secret ({kinds}); a title is the node's file "
            f"name, committed and synced with it, so it is never redacted in place: choose a "
            f"title without it"
        )


def check_name(what: str, value: str | None) -> None:
    """Refuse a name or identifier that holds a secret (``SecretInName``): a conversation or
    completion id, a host, a drafter, a cluster or scope folder, a cited path. Each becomes a
    file or folder name, a coordinate or a front-matter value that other records repeat, so a
    marker in place would change what it names: the caller sends another. The refusal names
    ``what`` and the kind, never the value."""
    kinds = _kinds_in(value) if isinstance(value, str) and value else ""
    if kinds:
        from osk.errors import SecretInName

        raise SecretInName(
            f"{what} holds what looks like a secret ({kinds}); {what} is stored as it is "
            f"(a name, an id or a path that other records repeat), so it is never redacted: "
            f"send it without the secret", argument=what, kinds=kinds,
        )


def _kinds_in(text: str) -> str:
    return ", ".join(kind for kind, _ in mask_secrets(text).findings)


def mask_secrets(text: str) -> Masked:
    """Replace every secret in ``text`` with a ``[REDACTED:kind]`` marker."""
    counts: Counter[str] = Counter()
    for _ in range(_MAX_PASSES):
        spans = sorted(_spans(text), key=lambda s: (s.start, s.rank))
        if not spans:
            break
        text = _replaced(text, _merged(spans), counts)
    return Masked(text, sorted((kind, n) for kind, n in counts.items() if n > 0))


# A replacement can expose a key that a secret's last characters hid (``…XYZ_password=x``), so
# the filter runs again on its own output until nothing is found: idempotent by construction.
_MAX_PASSES = 32  # in practice one or two; the bound only guards against a pathological input


def _replaced(text: str, spans: Iterator[_Span], counts: Counter[str]) -> str:
    pieces: list[str] = []
    position = 0
    for span in spans:
        for inner in MARKER.finditer(text, span.start, span.end):  # a marker swallowed again
            counts[inner.group()[10:-1]] -= 1
        pieces.append(text[position:span.start])
        pieces.append(marker(span.kind))
        counts[span.kind] += 1
        position = span.end
    pieces.append(text[position:])
    return "".join(pieces)


def _merged(spans: list[_Span]) -> Iterator[_Span]:
    """Union overlapping spans so no part of any detected secret survives."""
    current = spans[0]
    for span in spans[1:]:
        if span.start < current.end:
            best = span if span.rank < current.rank else current
            current = _Span(current.start, max(current.end, span.end), best.kind, best.rank)
        else:
            yield current
            current = span
    yield current


def _spans(text: str) -> Iterator[_Span]:
    for rank in _needle_index().ranks(text):
        for start, end, kind in DETECTORS[rank][0](text):
            if end > start:
                yield _Span(start, end, kind, rank)


class _NeedleIndex:
    """Which detectors to run on a text: those with a needle in it. Each distinct needle is
    tested once (a substring test is far cheaper than a regex scan, and a hundred detectors
    share many needles), then the detectors run in rank order."""

    def __init__(self, detectors: tuple[tuple[object, tuple[str, ...], tuple[str, ...]], ...]
                 ) -> None:
        exact: dict[str, list[int]] = {}
        lower: dict[str, list[int]] = {}
        for rank, (_, needles, lower_needles) in enumerate(detectors):
            for needle in needles:
                exact.setdefault(needle, []).append(rank)
            for needle in lower_needles:
                lower.setdefault(needle, []).append(rank)
        self.exact = list(exact.items())
        self.lower = list(lower.items())

    def ranks(self, text: str) -> list[int]:
        lower = text.lower()
        found = [ranks for needle, ranks in self.exact if needle in text]
        found += [ranks for needle, ranks in self.lower if needle in lower]
        return sorted({rank for ranks in found for rank in ranks})


@cache
def _needle_index() -> _NeedleIndex:
    return _NeedleIndex(DETECTORS)  # built on first use: DETECTORS is defined below





