"""What makes a found value a secret and not a stand-in: placeholders and masks, values that name
their own kind, identifiers, code literals and format fields, the shapes of credentials; where a
value sits on its line; the marker a redaction leaves (never found again). Used by the secret
detectors (``osk.capture.secret_detectors``). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


Found = Iterator[tuple[int, int, str]]


# -- value heuristics -----------------------------------------------------------------------

_IDENT_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
KEYWORDS = frozenset({
    "none", "null", "nil", "true", "false", "undefined", "~", "yes", "no", "on", "off",
    "required", "optional", "redacted",
})
TYPE_WORDS = frozenset({
    "str", "string", "int", "integer", "bool", "boolean", "bytes", "float", "number", "any",
    "object", "text", "char", "varchar", "uuid", "list", "dict", "secretstr",
})
_MASK_CHARS = frozenset("*xX•·.-_#?")


def is_placeholder(value: str) -> bool:
    """Values that stand for a secret without being one: $VAR, {{ tpl }}, <yours>, ***, 'pass'."""
    s = value.strip()
    if len(s) < 3 or MARKER.fullmatch(s) or set(s) <= _MASK_CHARS or "***" in s:
        return True
    if s.startswith(("$", "{")) or "{{" in s or "{%" in s or s.lower() in _STAND_INS:
        return True
    if s.startswith("%") and (s.endswith("%") or s.startswith("%(") or len(s) <= 3):
        return True
    if not any(c.isalnum() for c in _FORMAT_FIELD.sub("", s)):
        return True  # a format string such as '%s:%s' or '{}:{}', filled in later
    return s[0] == "<" and s[-1] == ">"


_FORMAT_FIELD = re.compile(r"%(?:\([A-Za-z_]+\))?[-#0 +]*[0-9]*[sdrif]|\{[A-Za-z0-9_]*\}")
_STAND_INS = frozenset({"pass", "password", "passwd", "pwd", "secret", "token", "apikey",
                        "api_key", "api-key", "changeme"})


def names_itself(value: str, kind: str) -> bool:
    """``CHALLENGE_PASSWORD = "challengePassword"``, ``client_secret="my-client-secret"``: a
    digit-free name that contains its own key word is a label, not a secret."""
    word = {"password": "pass", "api-key": "key", "access-key": "key",
            "private-key": "key"}.get(kind, kind)
    flat = value.lower()
    return (word in flat and not any(c.isdigit() for c in value)
            and bool(re.fullmatch(r"[A-Za-z_.-]+", value)))


def identifier_like(value: str) -> bool:
    """A name or attribute path with no digits: in code, a variable rather than a literal."""
    return bool(_IDENT_PATH.fullmatch(value)) and not any(c.isdigit() for c in value)


def literal_like(value: str) -> bool:
    if identifier_like(value) or _NUMBER.fullmatch(value):
        return False
    if "." in value and _IDENT_PATH.fullmatch(value):
        return False  # module.attribute, self.field: code even with digits in a name
    return not any(c in value for c in "([{")


def credential_like(value: str, scheme: str) -> bool:
    """Header credentials: reject prose such as 'Authorization: Basic authentication is…'."""
    if len(value) < 8:
        return False
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if scheme == "basic":
        return len(value) % 4 == 0 and (mixed or any(c.isdigit() or c == "=" for c in value))
    return any(c.isdigit() or c in "+/=_.-~" for c in value) or (mixed and len(value) >= 16)


def line_prefix(text: str, position: int) -> str:
    return text[text.rfind("\n", 0, position) + 1:position]


def rest_of_line(text: str, position: int) -> str:
    end = text.find("\n", position)
    return text[position:] if end < 0 else text[position:end]


def ends_statement(rest: str, yaml: bool = False) -> bool:
    tail = rest.strip()
    if not tail:
        return True
    if yaml:
        return tail.startswith("#")
    return tail.startswith(("#", "//", ",", ")", ";", "}", "]", "--"))


def mixed_token(body: str) -> bool:
    return (any(c.isdigit() for c in body) and any(c.isupper() for c in body)
            and any(c.islower() for c in body))


def has_digit(body: str) -> bool:
    return any(c.isdigit() for c in body)


def each_match(pattern: re.Pattern[str], text: str,
               accept: Callable[[re.Match[str]], tuple[int, int, str] | None]) -> Found:
    position = 0
    while (match := pattern.search(text, position)) is not None:
        span = accept(match)
        if span is None:
            position = match.start() + 1
            continue
        yield span
        position = match.end()
