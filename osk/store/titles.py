"""Titles: a node's title is its file name, so it must be portable and unique.

Uniqueness is vault-wide after NFC normalisation and case folding, because NTFS and APFS treat
names that differ only in case or normal form as the same file.
"""

from __future__ import annotations

import unicodedata

from osk.errors import TitleError

MAX_TITLE_BYTES = 200  # leaves room for ".md" and conflict suffixes under the 255-byte name limit
_FORBIDDEN = set('<>:"/\\|?*#^[]')  # Windows-forbidden plus Obsidian link syntax
_RESERVED = {
    "CON", "PRN", "AUX", "NUL",
    *(f"COM{i}" for i in range(1, 10)),
    *(f"LPT{i}" for i in range(1, 10)),
}


# Characters that reorder the text around them (Unicode bidirectional controls): a title
# carrying one can print as a different name than the one it is ("\u202eevil" shows reversed).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                  "\u2066\u2067\u2068\u2069")
# Unicode categories that print nothing on their own: format characters (zero-width space and
# joiners), controls, separators and combining marks. A title made only of these looks empty.
_UNSEEN = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"})


def title_key(title: str) -> str:
    """The form two titles are compared in: NFC, then case folded, then NFC again."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", title).casefold())


def check_portable(title: str) -> str:
    """Return the NFC form of ``title`` or raise TitleError saying exactly what is wrong."""
    if not isinstance(title, str) or not title.strip():
        raise TitleError("a title must be a non-empty string")
    nfc = unicodedata.normalize("NFC", title)
    if nfc != nfc.strip():
        raise TitleError(f"title {title!r} starts or ends with whitespace; trim it")
    bad = sorted({ch for ch in nfc if ch in _FORBIDDEN or ord(ch) < 32 or ord(ch) == 127})
    if bad:
        shown = " ".join(repr(ch) for ch in bad)
        raise TitleError(
            f"title {title!r} contains {shown}, which cannot appear in a portable file name "
            f"or an Obsidian link; replace them"
        )
    spoofing = sorted({ch for ch in nfc if ch in _BIDI})
    if spoofing:
        shown = " ".join(f"U+{ord(ch):04X}" for ch in spoofing)
        raise TitleError(
            f"title {title!r} contains the bidirectional control(s) {shown}, which make a "
            f"name print differently from what it is; remove them"
        )
    if all(unicodedata.category(ch) in _UNSEEN for ch in nfc):
        raise TitleError(
            f"title {title!r} prints as nothing (only invisible characters such as "
            f"zero-width spaces); use visible text"
        )
    if nfc.endswith("."):
        raise TitleError(f"title {title!r} ends with a dot, which Windows drops; remove it")
    if nfc.startswith("."):
        raise TitleError(f"title {title!r} starts with a dot, which hides the file; remove it")
    stem = nfc.split(".")[0].strip().upper()
    if stem in _RESERVED:
        raise TitleError(f"title {title!r} is a reserved device name on Windows ({stem})")
    if len(nfc.encode("utf-8")) > MAX_TITLE_BYTES:
        raise TitleError(
            f"title {title[:40]!r}… is {len(nfc.encode('utf-8'))} bytes in UTF-8; "
            f"the limit is {MAX_TITLE_BYTES}; shorten it"
        )
    return nfc

