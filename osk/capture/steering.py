"""What in a stored text imitates structure a host or a model reads as its own: tags, role
markers, tool calls and results; shared by the fence every hook injection passes
(``osk.hooks.fence``) and, later, by the steering check on nodes.

Matching runs on a *skeleton* of the text: the same length, one character for one, with
look-alikes folded (fullwidth and mathematical letters to ASCII, Cyrillic and Greek letters
that print like Latin ones, colons that print like ``:``, brackets that print like ``<``/``>``
as ``LOOK_OPEN``/``LOOK_CLOSE``). A span found in the skeleton is the same span of the text,
so the fence changes the text only where the skeleton matched.

Standard library only (hook path).
"""

from __future__ import annotations

import re
import unicodedata

LOOK_OPEN, LOOK_CLOSE = "\ue000", "\ue001"  # private-use stand-ins for CJK angle brackets

# Brackets that print like < and >, beyond those NFKC folds to them (fullwidth, small forms):
# folded to < and >. CJK angle brackets, which Korean and Chinese prose uses for titles
# (〈책〉), fold to the stand-ins, which open a tag only before a Latin letter or a sign.
_OPENERS = "\u2039\u27e8\u02c2\u1438\u276e\u29fc\u276c\u2770"
_CLOSERS = "\u203a\u27e9\u02c3\u1433\u276f\u29fd\u276d\u2771"
_CJK = {"\u3008": LOOK_OPEN, "\u2329": LOOK_OPEN, "\u3009": LOOK_CLOSE, "\u232a": LOOK_CLOSE}
_COLONS = "\ua789\u2236\u02f8\u0589\u05c3\u16ec\u1365\u0703\u0704"
# Cyrillic and Greek letters that print as Latin ones (the forms a role word could borrow).
_LATIN_LIKE = dict(zip(
    "АВСЕНІЈКМОРЅТХУаеорсхуіјѕһԁӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧοιν",
    "ABCEHIJKMOPSTXYaeopcxyijshdlABEZHIKMNOPTYXoiv", strict=True))

# Invisible characters dropped before anything is matched: format characters (zero-width
# space and joiners, bidirectional controls, the BOM, tag characters that can carry a hidden
# ASCII text), variation selectors (which can too) and controls other than whitespace.
_VARIATION = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def visible(text: str) -> str:
    """``text`` without invisible characters; whitespace controls kept (callers fold them)."""
    if text.isascii():
        return "".join(ch for ch in text if " " <= ch < "\x7f" or ch in "\t\n\r")
    kept = []
    for ch in _VARIATION.sub("", text):
        kind = unicodedata.category(ch)
        if kind == "Cf" or (kind == "Cc" and ch not in "\t\n\r"):
            continue
        kept.append(ch)
    return "".join(kept)


def skeleton(text: str) -> str:
    """``text`` with each look-alike folded to what it imitates, one character for one."""
    if text.isascii():
        return text
    return "".join(_fold(ch) if ord(ch) > 127 else ch for ch in text)


def _fold(ch: str) -> str:
    if ch in _OPENERS:
        return "<"
    if ch in _CLOSERS:
        return ">"
    if ch in _CJK:
        return _CJK[ch]
    if ch in _COLONS:
        return ":"
    if ch in _LATIN_LIKE:
        return _LATIN_LIKE[ch]
    folded = unicodedata.normalize("NFKC", ch)
    if len(folded) == 1 and folded.isascii():
        return folded
    return ch


# A tag's opening bracket: < (or a look-alike) before a name, /, |, !, ? or another < (not
# "a < b", "<=", "<-", "<3"); a CJK angle bracket only before /, |, !, ? or a Latin letter, so
# titles in CJK prose (〈책〉) stay as they are. The tag runs to the next closing bracket.
TAG = re.compile(
    rf"(?:<(?=\s*[/|!?]|[^\s\d=\-])|{LOOK_OPEN}(?=\s*[/|!?]|[A-Za-z]))"
    rf"[^<>{LOOK_OPEN}{LOOK_CLOSE}\n]{{0,300}}[>{LOOK_CLOSE}]?")

ROLES = ("system", "user", "human", "assistant", "developer", "tool", "function", "model",
         "시스템", "사용자", "어시스턴트", "개발자")
# A role marker: a role word (as a whole word) and a colon.
ROLE = re.compile(r"(?<!\w)(?:" + "|".join(ROLES) + r")\s*:", re.IGNORECASE)
# Chat-template markers that use square brackets: [INST] [/INST] [SYS] [SYSTEM].
BRACKET_ROLE = re.compile(r"\[\s*/?\s*(?:INST|SYS|SYSTEM)\s*\]", re.IGNORECASE)

# Words that name a tool call or result in the hosts' message formats (Claude's tool_use /
# tool_result blocks, Codex's function_call / function_call_output / custom_tool_call items,
# OpenAI's tool_calls, Gemini's functionCall), or the keys of a JSON message or call.
TOOL_WORDS = re.compile(
    r"(?<![\w])(?:tool_use|tool_result|tool_use_id|tool_calls?|tool_call_id|function_call"
    r"|function_call_output|function_response|functionCall|functionResponse|custom_tool_call"
    r"|custom_tool_call_output|local_shell_call|mcp_tool_call|recipient_name)(?![\w])"
    r"|[\"'](?:role|arguments|parameters|input|output|call_id)[\"']\s*:", re.IGNORECASE)
