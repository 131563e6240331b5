"""The node contract's front matter as a model (governance/nodes.md): its keys, their types
and the rules each value follows, and the error that names what a file got wrong.

Built on pydantic, which costs about a tenth of a second to import and to build this model, so
it is imported only where front matter is validated or a model is needed (``osk.store.node`` imports
it on first use): a process that reads nodes restored from the catalog snapshot, such as a
fresh ``osk search``, never loads it. ``osk.store.node.KEYS`` names the same keys without it (a test
keeps the two equal).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from osk.errors import ContractError
from osk.store import clock, trust_state

MAX_SUMMARY = 300
_LINK = re.compile(r"^\[\[[^\[\]|]+\]\]$")
_FILE_CITATION = re.compile(r"^file:[^\[\]|]+$")  # osk.store.edges.written

Timestamp = Annotated[str, Field(description="ISO 8601, minute precision, with UTC offset")]
Link = Annotated[str, Field(description="an Obsidian link: [[Title]], [[_raw/KEY/CONV#Round N]]"
                                        " or [[file:PATH]]")]


class Frontmatter(BaseModel):
    """The contract's keys, in the order they are written."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    id: str
    created: Timestamp
    updated: Timestamp
    author: Literal["user", "agent"]
    drafter: str
    summary: str
    derived_from: list[Link] = Field(default_factory=list, alias="derived-from")
    conflicts: list[Link] = Field(default_factory=list)
    # Authority (issue 6): trust state and validity time. Optional so that hand-written nodes
    # stay short; absent trust reads as "confirmed" for author user and "inferred" for agent.
    trust: Literal["confirmed", "inferred"] | None = None
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    supersedes: Link | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not is_valid_id(value):
            raise ValueError("a non-empty single-line id")
        return value

    @field_validator("created", "updated", "valid_from", "valid_to")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not clock.is_minute_timestamp(value):
            raise ValueError("an ISO 8601 time with minutes and a UTC offset, "
                             "e.g. 2026-11-29T18:02+09:00")
        clock.parse(value)
        return value

    @field_validator("drafter")
    @classmethod
    def _drafter(cls, value: str) -> str:
        if not value.strip() or not _printable_line(value):
            raise ValueError("a model name on one line")
        return value

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        if not value.strip() or not _printable_line(value):
            raise ValueError("one non-empty line of printable text")
        if len(value) > MAX_SUMMARY:
            raise ValueError(f"at most {MAX_SUMMARY} characters (got {len(value)})")
        return value

    @field_validator("derived_from", "conflicts", mode="before")
    @classmethod
    def _none_listed(cls, value: Any) -> Any:
        # A list key left with nothing after it (``derived-from:`` once its last item is
        # deleted by hand, or an empty property as Obsidian writes one) is null to YAML:
        # no links, not a broken node.
        return [] if value is None else value

    @field_validator("derived_from", "conflicts")
    @classmethod
    def _links(cls, value: list[str]) -> list[str]:
        for item in value:
            if not isinstance(item, str) or not (_LINK.match(item) or _FILE_CITATION.match(item)):
                raise ValueError(f"links written as [[target]], or file:PATH (got {item!r})")
        if len(set(value)) != len(value):
            raise ValueError("each link at most once")
        return value

    @field_validator("supersedes")
    @classmethod
    def _supersedes(cls, value: str | None) -> str | None:
        if value is not None and not _LINK.match(value):
            raise ValueError(f"a link written as [[Title]] (got {value!r})")
        return value

    @property
    def trust_state(self) -> str:
        return trust_state.state_of(self.trust, self.author)


def is_valid_id(value: object) -> bool:
    """Whether ``value`` is a node id the contract takes: a string, not empty, without
    surrounding space, on one printable line."""
    return isinstance(value, str) and bool(value.strip()) and value == value.strip() \
        and _printable_line(value)


def _printable_line(text: str) -> bool:
    """No control characters (tab aside), line or paragraph separators, or lone surrogates."""
    return _UNPRINTABLE.search(text) is None


# Unicode categories Cc (but tab), Zl, Zp and Cs, spelled out for speed.
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


KEYS = tuple(
    (field.alias or name) for name, field in Frontmatter.model_fields.items()
)
REQUIRED_KEYS = tuple(
    (field.alias or name) for name, field in Frontmatter.model_fields.items()
    if field.is_required()
)


def validate_meta(path: str, data: dict[str, Any]) -> Frontmatter:
    try:
        return Frontmatter.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(error) for error in exc.errors()]
        first_key = problems[0][0]
        listing = "; ".join(f"key '{key}': {what}" for key, what in problems)
        raise ContractError(
            f"{path}: {listing}",
            path=path, key=first_key, expected=problems[0][1], problems=problems,
        ) from None


def _describe(error: Any) -> tuple[str, str]:
    key = str(error["loc"][0]) if error["loc"] else "?"
    key = Frontmatter.model_fields[key].alias or key if key in Frontmatter.model_fields else key
    kind = error["type"]
    if kind == "extra_forbidden":
        return key, f"not a contract key (allowed: {', '.join(KEYS)})"
    if kind == "missing":
        return key, "required but missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    return key, f"expected {message}" if kind == "value_error" else message
