"""``read_raw``: what a session reads of the evidence nodes cite besides other nodes.

A raw round (``_raw/KEY/CONV#Round N``), a whole record as the review view
(``osk.capture.raw_review``), or a file of the project the session works in (``file:PATH``),
at most ``RAW_CHARS`` characters per call. Another project's raw records are visible only under
scope isolation's rules (``Session.can_see_scope``), and every read is noted in the session's
read log, so a re-citation binds only to a state the session read in full. ``osk.engine.core``
imports this module when a session first reads one, so a process that only searches never
loads capture.
"""

from __future__ import annotations

from collections.abc import Sequence

from osk.calls.context import WriteContext
from osk.calls.results import RawRead
from osk.capture import raw, raw_review
from osk.capture.exclusions import excluded
from osk.capture.secrets import mask_secrets
from osk.errors import EdgeError, NodeNotFound
from osk.store.edges import (
    RAW_RECORD,
    FileTarget,
    RawTarget,
    in_git_folder,
    parse_target,
    raw_record,
)
from osk.store.fsutil import sha256_bytes
from osk.store.ids import check_identifier

RAW_CHARS = 6000  # read_raw: the review view's cap


def read_raw(ctx: WriteContext, coordinate: str, *, rounds: Sequence[int] | None = None,
             start: int = 0, length: int | None = None) -> RawRead:
    """A raw round (``_raw/KEY/CONV#Round N``), a record (``_raw/KEY/CONV``, optionally
    ``rounds``) as the review view, or a project file (``file:PATH``); at most 6,000
    characters per call. ``start`` pages on (for a record view: characters to skip in its
    first chosen round, as the view's cut notice says)."""
    text = check_identifier("coordinate", coordinate).strip()
    inner = text[2:-2] if text.startswith("[[") and text.endswith("]]") else text
    record = RAW_RECORD.match(inner)
    if record:
        return _read_record(ctx, record["key"], record["conv"], rounds, max(0, start))
    target = parse_target(inner)
    size = RAW_CHARS if length is None else max(1, min(int(length), RAW_CHARS))
    if isinstance(target, RawTarget):
        return _read_round(ctx, target, max(0, start), size)
    if isinstance(target, FileTarget):
        return _read_file(ctx, target, max(0, start), size)
    raise EdgeError(
        f"{coordinate!r} is a node title; read it with read_node. read_raw takes "
        f"_raw/KEY/CONVERSATION#Round N, _raw/KEY/CONVERSATION or file:PATH",
        coordinate=coordinate,
    )


def _check_visible(ctx: WriteContext, key: str) -> None:
    if not ctx.routing.key_visible(ctx.session, key):
        raise NodeNotFound(
            f"no raw record _raw/{key}/… visible to this session (scope {ctx.session.scope!r})",
            ref=key,
        )


def _read_round(ctx: WriteContext, target: RawTarget, start: int, size: int) -> RawRead:
    _check_visible(ctx, target.key)
    found = raw.read_round(ctx.vault, target, strict=False)
    body = str(found.text)
    end = min(len(body), start + size)
    ctx.reads.note(f"raw:{target.coordinate}", str(found.hash), start, end, len(body))
    return RawRead(ctx.session.scope, target.coordinate, "round", body[start:end], start, end,
                   len(body), start == 0 and end == len(body),
                   end if end < len(body) else None, str(found.hash), (target.round,),
                   excluded=_excluded(ctx, found.key, found.conversation, (found.number,)))


def _excluded(ctx: WriteContext, key: str, conversation: str,
              shown: Sequence[int]) -> tuple[int, ...]:
    """The rounds of ``shown`` the person keeps out of search and recall (``osk exclude``)."""
    hidden = excluded(ctx.vault)
    places = [RawTarget(key, conversation, number) for number in shown]
    return tuple(p.round for p in places if hidden.covers(p.record_path, p.coordinate))


def _read_record(ctx: WriteContext, key: str, conversation: str,
                 rounds: Sequence[int] | None, skip: int) -> RawRead:
    _check_visible(ctx, key)
    record = raw.read_record(ctx.vault, key, conversation, strict=False)
    view = raw_review.review(ctx.vault, key, conversation, rounds=rounds, cap=RAW_CHARS,
                             skip=skip)
    cut_inside = view.cut and view.next_skip > 0
    for index, number in enumerate(view.shown):
        partial = (index == 0 and skip > 0) or (cut_inside and number == view.shown[-1])
        if not partial:  # shown in full: the session has read this round
            found = record.round(number)
            ctx.reads.note(f"raw:{found.coordinate}", str(found.hash), 0, 1, 1)
    nxt = view.next_skip if cut_inside else None
    return RawRead(ctx.session.scope, raw_record(key, conversation), "record", view.text, skip,
                   skip + len(view.text), len(view.text), not view.cut, nxt, None,
                   tuple(view.shown), tuple(view.next_rounds),
                   _excluded(ctx, record.key, record.conversation, view.shown))


def _read_file(ctx: WriteContext, target: FileTarget, start: int, size: int) -> RawRead:
    """A project file, secret-filtered (an ``.env`` is a project file too); never one outside
    the project (a ``..`` or a symbolic link that leads out) nor under ``.git/``. Offsets page
    through the filtered text; the hash is the file's own (what a citation binds to)."""
    root = ctx.session.repo_root
    if root is None:
        raise EdgeError("this session works in no Git repository, so file: paths have no "
                        "project folder to resolve against", link=target.link)
    base = root.resolve()
    path = (base / target.path).resolve()
    if base not in path.parents or not path.is_file():
        raise NodeNotFound(f"no file {target.path} in {base}", ref=target.link)
    if in_git_folder(target.path) or in_git_folder(path.relative_to(base).as_posix()):
        raise EdgeError(f"{target.link} lies under .git/, Git's own files (its config may hold "
                        f"a token in a remote URL); read_raw reads project files only",
                        link=target.link)
    data = path.read_bytes()
    try:
        body = mask_secrets(data.decode("utf-8")).text
    except UnicodeDecodeError:
        raise EdgeError(f"{target.path} is not UTF-8 text", link=target.link) from None
    digest = sha256_bytes(data)
    end = min(len(body), start + size)
    ctx.reads.note(f"file:{ctx.session.key.key}:{target.path}", digest, start, end, len(body))
    return RawRead(ctx.session.scope, target.link, "file", body[start:end], start, end, len(body),
                   start == 0 and end == len(body), end if end < len(body) else None,
                   digest, ())
