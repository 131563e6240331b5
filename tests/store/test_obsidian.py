"""The vault in Obsidian (issue 14 items 7-9): the template's settings keep machinery out of the
file list, search and graph, nothing per-device committed; every node's citations are body links
that resolve to their notes, and file citations open the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import writekit
from obsidian_support import links_of, resolve, unresolved
from sync_support import git, make_devices
from writekit import snapshot

from osk.calls.request import NewNode, NodeEdit
from osk.engine.core import Engine
from osk.errors import ContractError
from osk.store import node, sources
from osk.store.node import split_frontmatter
from osk.store.vault import GOVERNANCE, LEDGER_DIR, MEMORY_DIR, OBJECTS_DIR, RAW_DIR, Vault
from osk.sync.cycle import sync_once
from osk.verbs import validate

repo, eng = writekit.repo, writekit.eng  # shared fixtures

# written and read through osk: out of the file list (issue 24 item 9), search and the graph
EXCLUDED = HIDDEN_FROM_LIST = {RAW_DIR, LEDGER_DIR, OBJECTS_DIR, MEMORY_DIR, GOVERNANCE}


def _settings(vault: Vault, name: str) -> dict:
    return json.loads((vault.root / ".obsidian" / name).read_text(encoding="utf-8"))


def test_a_new_vault_excludes_the_machinery_from_obsidian_search_and_graph(vault: Vault):
    filters = _settings(vault, "app.json")["userIgnoreFilters"]
    assert {f.rstrip("/") for f in filters} == EXCLUDED
    assert all(f.endswith("/") for f in filters)  # folder filters, not name prefixes


def test_the_enabled_css_snippet_hides_raw_records_ledgers_and_objects_from_the_file_list(
        vault: Vault):
    enabled = _settings(vault, "appearance.json")["enabledCssSnippets"]
    assert enabled == ["osk-machinery"]
    css = (vault.root / ".obsidian" / "snippets" / "osk-machinery.css").read_text(encoding="utf-8")
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    hidden = set(re.findall(r'\.nav-folder:has\(> \.nav-folder-title\[data-path="([^"]+)"\]\)',
                            rules))
    assert hidden == HIDDEN_FROM_LIST
    assert re.search(r"\{\s*display:\s*none;\s*\}", rules)


def test_the_settings_are_committed_and_per_device_workspace_files_never_are(tmp_path: Path):
    remote, (dev1, dev2) = make_devices(tmp_path, 2)
    for name in ("workspace.json", "workspace-mobile.json"):  # what Obsidian writes on open
        (dev1.root / ".obsidian" / name).write_text('{"main": {}}\n', encoding="utf-8")
    assert git(dev1.root, "status", "--porcelain") == ""
    sync_once(dev1)
    published = set(git(remote, "ls-tree", "-r", "--name-only", "main").split())
    assert {".obsidian/app.json", ".obsidian/appearance.json",
            ".obsidian/snippets/osk-machinery.css"} <= published
    assert not {p for p in published if p.startswith(".obsidian/workspace")}
    sync_once(dev2)
    assert (dev2.root / ".obsidian" / "app.json").is_file()
    assert not (dev2.root / ".obsidian" / "workspace.json").exists()


# -- issue 14 items 8 and 9: the provenance graph in Obsidian ---------------------------------
def _cited_vault(vault: Vault, eng: Engine, repo: Path) -> dict[str, str]:
    """Nodes written through the engine, citing raw rounds, other nodes and a project file;
    returns title -> vault path."""
    round_1 = eng.append_raw("talk", user="Which build tool?", assistant="cargo dist.").coordinate
    round_2 = eng.append_raw("talk", user="And tests?", assistant="cargo nextest.").coordinate
    paths = {}
    paths["build"] = eng.create_node(NewNode("build", "How this project builds",
                                             "The build cluster.\n",
                                             space="Scope", cluster="build", drafter="m")).path
    paths["Release builds"] = eng.create_node(
        NewNode("Release builds", "Release builds use cargo dist",
                "Use `cargo dist` for releases.\n",
                space="Scope", cluster="build", drafter="m",
                derived_from=(round_1, "build", "file:src/app.py"))).path
    paths["Old test runner"] = eng.create_node(
        NewNode("Old test runner", "Tests ran with cargo test", "cargo test.\n", space="Scope",
                cluster="build", drafter="m", derived_from=(round_1,))).path
    paths["Test runner"] = eng.create_node(
        NewNode("Test runner", "Tests run with nextest", "cargo nextest run.\n", space="Scope",
                cluster="build", drafter="m", derived_from=(round_2, "Release builds"),
                conflicts=("Old test runner",), supersedes="Old test runner")).path
    return paths


def _front_links(text: str) -> list[str]:
    meta, _ = split_frontmatter("n.md", text)
    links = [*meta.get("derived-from", []), *meta.get("conflicts", [])]
    return [link[2:-2] if link.startswith("[[") else link
            for link in (*links, meta.get("supersedes")) if link]


def test_every_citation_is_a_body_link_that_resolves_to_its_note_in_obsidian(
        vault: Vault, eng: Engine, repo: Path):
    paths = _cited_vault(vault, eng, repo)
    eng.refresh()
    checked = 0
    for found in eng.catalog.nodes():
        text = vault.abs(found.path).read_text(encoding="utf-8")
        links = links_of(text)
        for inner in links.wikilinks:  # no broken link anywhere in a node's body
            assert resolve(vault.root, inner) is not None, (found.path, inner)
        shown = {inner.split("|")[0] for inner in links.wikilinks}
        for target in _front_links(text):
            if target.startswith("file:"):
                continue  # item 9: a Markdown link instead (next test)
            assert target in shown, (found.path, target)  # the graph and backlinks see it
            checked += 1
    assert checked == 7  # 2 + 1 + 4 links (derived-from, conflicts, supersedes)
    release = links_of(vault.abs(paths["Release builds"]).read_text(encoding="utf-8"))
    [raw_link] = [w for w in release.wikilinks if w.startswith("_raw/")]
    assert resolve(vault.root, raw_link) == vault.root / "_raw" / "proj" / "talk.md"
    assert resolve(vault.root, "build") == vault.abs(paths["build"])
    assert raw_link.split("|")[1] == "proj/talk, round 1"  # how it reads in the note
    # Raw records are Excluded files (hidden from search and the graph, not from links): the
    # citation still opens the record at its round.
    assert f"{RAW_DIR}/" in _settings(vault, "app.json")["userIgnoreFilters"]


def test_a_node_without_the_section_is_what_obsidian_showed_before(vault: Vault, eng: Engine,
                                                                     repo: Path):
    paths = _cited_vault(vault, eng, repo)
    text = vault.abs(paths["Release builds"]).read_text(encoding="utf-8")
    before = _without_section(text)
    assert links_of(before).wikilinks == ()  # front matter only: no body link at all
    assert links_of(text).wikilinks


def test_a_file_citation_is_project_relative_text_never_a_link_or_a_device_path(
        vault: Vault, eng: Engine, repo: Path):
    """Issue 24 item 9: the vault syncs to devices where the project lies elsewhere, and
    Obsidian reads a [[file:…]] property as a link to a note that cannot exist."""
    paths = _cited_vault(vault, eng, repo)
    text = vault.abs(paths["Release builds"]).read_text(encoding="utf-8")
    links = links_of(text)
    assert not [w for w in (*links.wikilinks, *links.properties) if w.startswith("file:")]
    assert links.urls == () and str(repo) not in text and "file://" not in text
    assert "\n  - file:src/app.py\n" in text  # the front matter: relative to the project
    assert "file:src/app.py (a project file)" in text  # the sources section, as text
    assert "[[file:src/app.py]]" in eng.read_node("Release builds").derived_from  # as tools take it
    eng.update_node("Release builds", NodeEdit(summary="Release builds use cargo dist (2)"))
    assert eng.recheck().candidates == () and validate.run(vault) == []
    (repo / "src" / "app.py").write_text("changed\n", encoding="utf-8")
    [candidate] = eng.recheck().candidates  # the citation is bound as before
    assert candidate.target == "[[file:src/app.py]]"


def test_a_file_path_with_markdown_characters_stays_text(tmp_path: Path):
    section = sources.render(["[[file:src/a b#1_[x].py]]"], [], None)
    links = links_of(section)
    assert links.wikilinks == () and links.urls == ()
    assert "file:src/a b\\#1\\_\\[x\\].py (a project file)" in section


def test_the_section_is_not_body_text_hashes_reads_and_search_ignore_it(
        vault: Vault, eng: Engine, repo: Path):
    paths = _cited_vault(vault, eng, repo)
    text = vault.abs(paths["Release builds"]).read_text(encoding="utf-8")
    assert sources.OPEN in text
    eng.refresh()
    found = eng.catalog.get("Release builds")
    assert found.body == "Use `cargo dist` for releases.\n"
    assert found.body_hash == node.body_hash("Use `cargo dist` for releases.\n")
    assert eng.read_node("Release builds").text == found.body
    assert validate.run(vault) == []
    assert eng.recheck().candidates == ()
    # the cited title's words are in the section only: no search hit for them there
    assert [h.title for h in eng.search("nextest", kind="nodes").hits] == ["Test runner"]
    # an edit by anchor works on the body and the section follows the new links
    eng.update_node("Release builds", NodeEdit(old_text="releases", new_text="release builds",
                             derived_from=("build",)))
    text = vault.abs(paths["Release builds"]).read_text(encoding="utf-8")
    assert links_of(text).wikilinks == ("build",) and links_of(text).urls == ()
    assert text.endswith("---\n" + sources.render(["[[build]]"], [], None)
                         + "Use `cargo dist` for release builds.\n")


def test_a_node_written_before_the_section_stays_valid_and_gets_it_on_its_next_write(
        vault: Vault, eng: Engine, repo: Path):
    paths = _cited_vault(vault, eng, repo)
    for rel in [paths[t] for t in ("Release builds", "Old test runner", "Test runner")]:
        path = vault.abs(rel)  # the node as osk wrote it before the sources section
        path.write_text(_without_section(path.read_text(encoding="utf-8")), encoding="utf-8")
    eng.refresh()
    assert validate.run(vault) == []
    assert eng.recheck().candidates == ()  # the body hashes the ledger bound are unchanged
    eng.update_node("Release builds",
                    NodeEdit(summary="Release builds use cargo dist, not cargo build"))
    text = vault.abs(paths["Release builds"]).read_text(encoding="utf-8")
    assert sources.OPEN in text and "file:src/app.py (a project file)" in text
    assert sources.OPEN not in vault.abs(paths["Test runner"]).read_text(encoding="utf-8")
    assert validate.run(vault) == [] and eng.recheck().candidates == ()


def test_a_hand_edit_of_the_section_changes_no_body_and_the_next_write_restores_it(
        vault: Vault, eng: Engine, repo: Path):
    paths = _cited_vault(vault, eng, repo)
    path = vault.abs(paths["Release builds"])
    written = path.read_text(encoding="utf-8")
    assert "\n- Derived from [[_raw/" in written
    path.write_text(written.replace("- Derived from", "- Derived from my notes and"),
                    encoding="utf-8")
    eng.refresh()
    assert eng.catalog.get("Release builds").body == "Use `cargo dist` for releases.\n"
    assert eng.recheck().candidates == () and validate.run(vault) == []
    eng.update_node("Release builds", NodeEdit(summary="Release builds use cargo dist (checked)"))
    assert "my notes" not in path.read_text(encoding="utf-8")


def test_a_body_carrying_the_marker_line_is_refused_and_nothing_is_written(
        vault: Vault, eng: Engine, repo: Path):
    _cited_vault(vault, eng, repo)
    before = snapshot(vault)
    for call in (
        lambda: eng.create_node(NewNode("Forged", "s", f"{sources.OPEN}\n- Derived from [[x]]\n"
                                        f"{sources.CLOSE}\nreal body\n", space="Scope",
                                        cluster="build", drafter="m")),
        lambda: eng.update_node("Release builds", NodeEdit(old_text="Use",
                                         new_text=f"x\n{sources.OPEN}\nUse")),
    ):
        with pytest.raises(ContractError, match="sources marker"):
            call()
    assert snapshot(vault) == before


def _without_section(text: str) -> str:
    head, _, rest = text.partition("\n---\n")
    section, body = sources.split(rest)
    assert section
    return head + "\n---\n" + body


def test_a_raw_records_quoted_tool_arguments_form_no_links(vault: Vault, eng: Engine,
                                                           repo: Path):
    """Issue 24 item 9: a tool call that quotes citations, whole or cut short, as capture
    summarises it; the record must read as text in Obsidian, and read back the same."""
    first = eng.append_raw("talk", user="Which build tool?", assistant="cargo dist.").coordinate
    call = ('mcp__osk__create_node: {"derived_from": ["[[' + first + ']]", "[[file:a.py]]"], '
            '"body": "see [[[Release builds]]] and [[_r…')
    eng.append_raw("talk", user="Write it down.", assistant="Done.", tools=[call])
    record = vault.root / "_raw" / "proj" / "talk.md"
    assert unresolved(vault.root) == []
    assert links_of(record.read_text(encoding="utf-8")).wikilinks == ()
    [tool] = eng.read_raw(f"{first[:-1]}2").text.split("### Tools\n\n")[1:]
    assert "[[" not in tool and "[\\[_raw/proj/talk#Round 1]]" in tool
