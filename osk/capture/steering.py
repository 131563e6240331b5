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

import functools
import re
import unicodedata

from osk.capture.patterns import lazy

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

# Characters that need a look (everything but printable ASCII, whitespace, Hangul, kana and CJK
# ideographs, which are neither invisible nor look-alikes): only these pay for a lookup.
_UNCOMMON = lazy(  # 5 ms to compile: only a text with a character beyond ASCII needs it
    "[^\x20-\x7e\t\n\r\u1100-\u11ff\u3130-\u318f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7a3]")
_ASCII_UNCOMMON = re.compile("[^\x20-\x7e\t\n\r]")  # in an ASCII text, what _UNCOMMON matches


def _uncommon(text: str) -> re.Pattern[str]:
    return _ASCII_UNCOMMON if text.isascii() else _UNCOMMON


def visible(text: str) -> str:
    """``text`` without invisible characters: format characters (zero-width space and joiners,
    bidirectional controls, the BOM, tag characters that can carry a hidden ASCII text),
    variation selectors (which can too) and controls; whitespace controls are kept (callers
    fold them)."""
    return _uncommon(text).sub(_shown, text)


def skeleton(text: str) -> str:
    """``text`` with each look-alike folded to what it imitates, one character for one."""
    return _uncommon(text).sub(lambda found: _fold(found.group()), text)


def _shown(found: re.Match[str]) -> str:
    ch = found.group()
    if "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef":
        return ""
    return "" if unicodedata.category(ch) in ("Cf", "Cc") else ch


@functools.lru_cache(maxsize=4096)
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


# -- steering: text meant to act on the model from outside osk's frame -----------------------
# A node may say what to do ("use pnpm, not npm", "always run the linter first"): that is what
# memory is for. Steering is text that addresses the model's own frame instead: it speaks as a
# role of the conversation, writes the markup of a chat or of osk's blocks, imitates a tool
# call or its result, or tells the model to set aside the instructions it was given. Each kind
# is a pattern over the skeleton of the node's text (look-alikes and invisible characters do
# not hide it).
_LINE_ROLE = lazy(  # a role at a line's start: words that name nothing but a chat role
    r"^[ \t>*_#\-]*(?:human|assistant|어시스턴트)[ \t]*:", re.IGNORECASE | re.MULTILINE)
# Words that also name ordinary things ("System: Ubuntu 24.04", "Tool: ripgrep") count as roles
# at line starts only when two different ones make a dialogue.
_DIALOGUE_ROLE = lazy(
    r"^[ \t>*_#\-]*(system|human|assistant|developer|user|tool|시스템|사용자|어시스턴트|개발자)"
    r"[ \t]*:", re.IGNORECASE | re.MULTILINE)
_SHOUTED_ROLE = lazy(r"(?<!\w)(?:SYSTEM|HUMAN|ASSISTANT|DEVELOPER)[ \t]*:")
_CHAT_MARKUP = lazy(
    r"<\s*/?\s*(?:osk-memory|osk-recall|system|system-reminder|assistant|human|developer"
    r"|instructions|function_calls|function_results|tool_use|tool_result|tool_call"
    r"|tool_response|start_of_turn|end_of_turn|antml:[\w-]+|시스템)(?=[\s>/])"
    r"|<\s*/\s*user\s*>"
    r"|<\s*invoke\s+name\s*=|<\|[\w-]+\|>|\[\s*/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>",
    re.IGNORECASE)
_TOOL_TRAFFIC = lazy(
    r"[\"']type[\"']\s*:\s*[\"'](?:tool_use|tool_result|function_call|function_call_output"
    r"|custom_tool_call|custom_tool_call_output|local_shell_call|mcp_tool_call)[\"']"
    r"|[\"'](?:tool_calls|tool_use_id|tool_call_id|functionCall|functionResponse)[\"']\s*:"
    r"|[\"']role[\"']\s*:\s*[\"'](?:system|developer|assistant|tool|user)[\"']"
    r"|[\"']name[\"']\s*:\s*[\"'][^\"']*[\"']\s*,\s*[\"'](?:input|arguments|parameters)[\"']\s*:",
    re.IGNORECASE)
_OVERRIDE = lazy(
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|of\s+)?"
    r"(?:the\s+|your\s+|my\s+)?(?:previous|prior|above|earlier|preceding|former|original"
    r"|system|developer|safety|all|user'?s?)\s+(?:\w+\s+)?(?:instructions?|prompts?"
    r"|directives?|guidelines|guardrails|rules|messages)\b"
    r"|\byou\s+are\s+now\s+(?:in\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|DAN"
    r"|developer\s+mode|root|admin)\b"
    r"|\b(?:new|updated|real|actual|true)\s+(?:system\s+)?instructions\s*:"
    r"|\b(?:previous|prior|above|earlier|original|system)\s+(?:instructions|prompt|rules)\s+"
    r"(?:are|were|is)\s+(?:now\s+)?(?:void|cancell?ed|canceled|obsolete|revoked|lifted"
    r"|superseded|no\s+longer)"
    r"|\b(?:reveal|print|leak|repeat|show)\s+(?:your|the)\s+(?:system|developer)\s+prompt"
    r"|이전\s*(?:의\s*)?(?:모든\s*)?(?:지시|지침|명령|규칙)\S*\s*(?:을|를)?\s*(?:모두\s*)?무시"
    r"|(?:시스템|system)\s*프롬프트\S*\s*(?:을|를)?\s*(?:무시|공개|출력)",
    re.IGNORECASE)
# osk's own section headings and item ids, which only osk writes into its blocks.
_OSK_MARKUP = lazy(
    r"^[ \t>]*#+[ \t]*(?:Scope memory \(|Nodes this scope's work uses|Recent nodes"
    r"|About the person|Most cited nodes"
    r"|Recheck notes|Pending reviews|Eviction items)|\(id [0-9a-f]{8}-[0-9a-f]{4}-",
    re.IGNORECASE | re.MULTILINE)
_HIDDEN = lazy("[\U000e0000-\U000e007f]")  # tag characters: an ASCII text nobody sees
STEERING_KINDS = (("role marker", _LINE_ROLE), ("role marker", _SHOUTED_ROLE),
                  ("chat markup", _CHAT_MARKUP), ("tool call", _TOOL_TRAFFIC),
                  ("override", _OVERRIDE), ("osk markup", _OSK_MARKUP))
# A word every override names (in lower case): without one, its pattern is not run, since a long
# alternation is the slowest search here.
_OVERRIDE_WORDS = ("ignore", "disregard", "forget", "override", "bypass", "you are now",
                   "instructions", "prompt", "rules", "무시", "프롬프트")
_SOURCES = lazy(r"<!-- osk-sources:.*?<!-- /osk-sources -->", re.DOTALL)


def node_steering(title: str, summary: str, body: str) -> tuple[str, ...]:
    """``steering`` of a node: its title, summary and body are judged together, wherever a
    node is judged (the engine's markers, a search from the store, the hooks' origin line)."""
    return steering(f"{title}\n{summary}\n{body}")


def steering(text: str) -> tuple[str, ...]:
    """The kinds of steering in a node's text (title, summary, body), in a fixed order; ()
    when there is none. osk's own sources block is not the author's text and is skipped."""
    text = _SOURCES.sub("", text)
    found: list[str] = []
    if _HIDDEN.search(text):  # read what it hides, as the model's tokenizer may
        found.append("hidden text")
        text = _HIDDEN.sub(lambda m: chr(ord(m.group()) - 0xE0000), text)
    shape = skeleton(visible(text))
    lower = shape.lower()
    for kind, pattern in STEERING_KINDS:
        if kind == "override" and not any(word in lower for word in _OVERRIDE_WORDS):
            continue
        if kind not in found and pattern.search(shape):
            found.append(kind)
    roles = {role.casefold() for role in _DIALOGUE_ROLE.findall(shape)}
    if len(roles) > 1 and "role marker" not in found:
        found.insert(0, "role marker")
    return tuple(found)
