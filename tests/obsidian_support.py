"""How Obsidian reads a vault's links, for the tests: a real CommonMark parser plus Obsidian's
documented resolution rules.

Parsing: markdown-it-py (CommonMark) with mdit-py-plugins' front matter rule, and one inline
rule for ``[[wikilinks]]`` that runs right after code spans, as Obsidian's own syntax does: a
link inside code is not a link, and the text inside ``[[…]]`` is not Markdown. Body links are
what the graph, backlinks and parsers such as obsidiantools read.

Resolution (help.obsidian.md, "Internal links" and "Properties"): a wikilink's target is the
text before ``|`` (display text) and ``#`` (a heading in the note); a target with a ``/`` is a
path from the vault root, a bare name is a note of that file name anywhere in the vault; ``.md``
may be left out. Obsidian does not index hidden folders (``.obsidian``, ``.osk``, ``.git``), and
the *Excluded files* setting hides notes from search and the graph without making links to them
unresolved. Quoted ``"[[…]]"`` values of a list property are links too.

This is deliberately stricter than Obsidian where Obsidian would guess: a bare name must match
exactly one note, also after case folding, and a heading must exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin


def _wikilink(state: StateInline, silent: bool) -> bool:
    start = state.pos
    if not state.src.startswith("[[", start):
        return False
    end = state.src.find("]]", start + 2)
    inner = state.src[start + 2:end] if end != -1 else ""
    if not inner or "[" in inner or "\n" in inner:
        return False
    if not silent:
        state.push("wikilink", "", 0).content = inner
    state.pos = end + 2
    return True


def parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").use(front_matter_plugin)
    md.inline.ruler.after("backticks", "wikilink", _wikilink)
    # markdown-it refuses file: URLs as links by default, a policy for HTML served from the
    # web; Obsidian opens them (its drag-and-drop writes them), so the parser must see them.
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


_MD = parser()


@dataclass(frozen=True)
class Links:
    wikilinks: tuple[str, ...]  # the text inside [[…]], as written
    urls: tuple[str, ...]  # Markdown link destinations
    properties: tuple[str, ...]  # "[[…]]" values of front matter lists, inner text


def _inline(tokens: list[Token]) -> list[Token]:
    found: list[Token] = []
    for token in tokens:
        found.extend(token.children or ())
    return found


def links_of(text: str) -> Links:
    tokens = _MD.parse(text)
    children = _inline(tokens)
    props: list[str] = []
    for token in tokens:
        if token.type == "front_matter":
            data = yaml.safe_load(token.content) or {}
            for value in data.values():
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str) and item.startswith("[[") and item.endswith("]]"):
                        props.append(item[2:-2])
    return Links(
        tuple(t.content for t in children if t.type == "wikilink"),
        tuple(str(t.attrs["href"]) for t in children if t.type == "link_open"),
        tuple(props),
    )


def headings_of(text: str) -> list[str]:
    tokens = _MD.parse(text)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def notes(root: Path) -> list[Path]:
    """The Markdown files Obsidian indexes: hidden folders left out."""
    return [p for p in root.rglob("*.md")
            if not any(part.startswith(".") for part in p.relative_to(root).parts)]


def resolve(root: Path, inner: str) -> Path | None:
    """The note a wikilink's inner text opens, or None when it is broken."""
    target, _, heading = inner.split("|", 1)[0].partition("#")
    target = target.strip().removesuffix(".md")
    if "/" in target:
        note = root / f"{target}.md"
        found = [note] if note.is_file() and note in notes(root) else []
    else:
        found = [p for p in notes(root) if p.stem.casefold() == target.casefold()]
        if len(found) != 1 or found[0].stem != target:
            return None
    if len(found) != 1:
        return None
    if heading and heading.strip() not in headings_of(found[0].read_text(encoding="utf-8")):
        return None
    return found[0]


def unresolved(root: Path) -> list[tuple[str, str]]:
    """Every link Obsidian would show as unresolved: (note, link text) for each wikilink in a
    note's body and each ``[[…]]`` value of its front matter lists that opens no note."""
    found = []
    for note in notes(root):
        links = links_of(note.read_text(encoding="utf-8"))
        for inner in (*links.wikilinks, *links.properties):
            if resolve(root, inner) is None:
                found.append((note.relative_to(root).as_posix(), inner))
    return found


def listed(root: Path) -> list[str]:
    """The notes Obsidian's file explorer lists with the vault's settings: not in a hidden
    folder, nor in a top folder the vault's CSS snippets hide."""
    import re

    hidden: set[str] = set()
    for css in (root / ".obsidian" / "snippets").glob("*.css"):
        rules = re.sub(r"/\*.*?\*/", "", css.read_text(encoding="utf-8"), flags=re.S)
        hidden |= set(re.findall(r'\.nav-folder-title\[data-path="([^"]+)"\]', rules))
    return sorted(p.relative_to(root).as_posix() for p in notes(root)
                  if p.relative_to(root).parts[0] not in hidden)
