"""A person's redaction of raw rounds (``osk redact``, driven by ``osk.verbs.redaction``):
each chosen round is re-framed with the span replaced by a marker and a new content hash, the record
rewritten whole under its lock, and its device state brought along.
"""

from __future__ import annotations

from dataclasses import dataclass

from osk.capture import raw_ids
from osk.capture.raw import (
    RecordState,
    file_identity,
    ids_path,
    load_state,
    located_record,
    record_lock,
    record_state_path,
    save_state,
    verified_position,
    written,
)
from osk.capture.raw_text import (
    content_hash,
    parse_findings,
    round_content,
    round_head,
    round_trailer,
    scan_record,
)
from osk.errors import RawNotFound
from osk.store.locks import file_lock
from osk.store.vault import Vault

# -- redaction by the person (osk redact) ---------------------------------------------------

@dataclass(frozen=True)
class Rewritten:
    """One round a redaction changed: its hash before and after, and how many spans went."""

    number: int
    before: str
    after: str
    spans: int


def reframe_rounds(vault: Vault, key: str, conversation: str, numbers: set[int] | None,
                   span: str, kind: str, *, dry_run: bool = False) -> list[Rewritten]:
    """Replace every occurrence of ``span`` in the chosen rounds (all when ``numbers`` is None)
    with ``[REDACTED:kind]``: the one sanctioned break of raw-append-only (``osk redact``).

    Under the record's lock: the record must be exactly what this device acknowledged (or, with
    no device state, well formed); each changed round is re-framed with its new ``bytes``,
    ``parts`` and ``sha256`` and ``kind:count`` added to ``redacted``; the file is replaced
    atomically; the device state and completion index are rebuilt from the new bytes, so the
    next append takes the fast path again. Rounds not chosen keep their bytes.
    """
    from osk.capture.secrets import marker

    key_name, conversation_name, path, rel = located_record(vault, key, conversation)
    state_path = record_state_path(vault, key_name, conversation_name)
    with file_lock(record_lock(vault, key_name, conversation_name)):
        if not path.exists():
            raise RawNotFound(f"no raw record {rel}", path=rel)
        verified_position(path, rel, load_state(state_path), key_name, conversation_name)
        data = path.read_bytes()
        pieces, position, changed = [], 0, []
        for frame in scan_record(data, rel).frames:
            if numbers is not None and frame.number not in numbers:
                continue
            count = sum(text.count(span) for _, text in frame.sections)
            if not count:
                continue
            sections = [(k, text.replace(span, marker(kind))) for k, text in frame.sections]
            content, parts = round_content(sections)
            digest = content_hash(content)
            found = dict(parse_findings(frame.fields["redacted"]))
            found[kind] = found.get(kind, 0) + count
            fields = {**frame.fields, "bytes": str(len(content)), "sha256": digest,
                      "parts": parts, "redacted": ",".join(f"{k}:{c}" for k, c in found.items())}
            pieces += [data[position:frame.start],
                       round_head(frame.number, list(fields.items())) + content
                       + round_trailer(frame.number)]
            position = frame.end
            changed.append(Rewritten(frame.number, frame.recorded_hash, digest, count))
        if not changed or dry_run:
            return changed
        vault.write_file(path, b"".join(pieces) + data[position:])
        written(vault, rel)
        fresh = verified_position(path, rel, None, key_name, conversation_name)
        assert fresh.verified is not None
        raw_ids.write_all(ids_path(vault, key_name, conversation_name), fresh.verified,
                          fresh.rounds)
        save_state(state_path, RecordState(list(file_identity(path.stat())), fresh.rounds,
                                           fresh.chain, fresh.recent))
    return changed
