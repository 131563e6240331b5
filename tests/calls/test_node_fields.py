"""A node's fields are listed once: its front matter keys in ``osk.store.node.KEYS`` (those a
writer gives: ``node.WRITTEN_FIELDS``) and where it goes in ``osk.calls.request.PLACEMENT``.

Where a copy must stay a declaration, a test here holds it to those lists: the request classes
(typed fields a reader and the type checker follow), the MCP tools' argument models
(tests/calls/test_request.py: their descriptions and limits are the wire schema), the contract's
pydantic model (tests/store/test_node.py: ``node.KEYS`` exists so that reading a node needs no
pydantic), the write path (which turns each field into its key: checked by writing one of each),
and what a read hands back. ``osk import``'s keys are derived from ``NewNode`` in code.
"""

from __future__ import annotations

from dataclasses import fields

import writekit
from writekit import create

from osk.calls.request import PLACEMENT, NewNode, NodeEdit
from osk.calls.results import NodeRead
from osk.engine.core import Engine
from osk.store import node
from osk.store.vault import Vault
from osk.surfaces.tool_models import NodeOut
from osk.verbs import importer

repo, eng, hub = writekit.repo, writekit.eng, writekit.hub  # shared fixtures


def names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def test_a_new_node_takes_its_placement_and_every_field_a_writer_gives():
    assert names(NewNode) == set(PLACEMENT) | set(node.WRITTEN_FIELDS) | {"hub_summary"}


def test_an_edit_may_change_every_field_a_writer_gives():
    assert set(node.WRITTEN_FIELDS) <= names(NodeEdit)
    body_and_rechecks = {"body", "expect_hash", "old_text", "new_text", "recheck_of"}
    assert names(NodeEdit) == set(node.WRITTEN_FIELDS) | body_and_rechecks


def test_the_written_fields_are_the_keys_osk_does_not_set():
    assert [node.field_name(k) for k in node.KEYS if k not in node.SET_BY_OSK] == list(
        node.WRITTEN_FIELDS)
    assert set(node.SET_BY_OSK) < set(node.KEYS)


def test_an_import_line_names_what_create_node_takes_but_what_the_import_sets():
    assert importer.KNOWN_KEYS == names(NewNode) - importer.SET_BY_IMPORT
    assert importer.KNOWN_KEYS == {"title", "summary", "body", "space", "scope", "cluster",
                                   "derived_from", "valid_from", "valid_to", "supersedes"}


def test_a_line_becomes_the_node_create_node_is_given():
    lines, rejected, unknown = importer.read_lines([
        '{"title": "Kites", "summary": "On kites.", "body": "Kites fly.\\n", "space": "domain",'
        ' "cluster": "sky", "derived_from": "file:README.md", "valid_from": '
        '"2026-01-01T00:00+00:00", "valid_to": "2026-02-01T00:00+00:00", "supersedes": '
        '"[[Old kites]]", "lang": "en", "colour": "red"}'])
    assert not rejected and unknown == {"colour"}
    assert lines[0].node == NewNode(
        "Kites", "On kites.", "Kites fly.\n", space="Domain", cluster="sky", drafter="",
        derived_from=("file:README.md",), valid_from="2026-01-01T00:00+00:00",
        valid_to="2026-02-01T00:00+00:00", supersedes="[[Old kites]]")


def test_a_line_with_a_bad_optional_text_names_the_first_in_create_node_s_order():
    _, rejected, _ = importer.read_lines([
        '{"title": "T", "summary": "S", "body": "B", "space": "domain", "supersedes": 1,'
        ' "cluster": 2}'])
    assert [r.reason for r in rejected] == ["'cluster' must be a string"]


def front_matter(vault: Vault, path: str) -> dict[str, object]:
    meta, _ = node.split_frontmatter(path, vault.abs(path).read_text(encoding="utf-8"))
    return meta


def test_the_write_path_writes_a_key_for_every_field_it_is_given(eng: Engine, vault: Vault,
                                                                   hub: str):
    create(eng, "Old limit", body="Ten per minute.\n")
    create(eng, "Burst limit", body="Fifty at once.\n")
    made = eng.create_node(NewNode(
        "New limit", "Twenty per minute", "Twenty per minute.\n", space="Scope", cluster="auth",
        drafter="m", derived_from=("[[Old limit]]",), conflicts=("[[Burst limit]]",),
        valid_from="2026-12-01T00:00+00:00", valid_to="2027-12-01T00:00+00:00",
        supersedes="Old limit"))
    assert list(front_matter(vault, made.path)) == list(node.KEYS)
    changed = {"summary": "Thirty per minute", "drafter": "n",
               "derived_from": ["[[Burst limit]]"], "conflicts": ["[[Old limit]]"],
               "valid_from": "2026-12-02T00:00+00:00", "valid_to": "2027-12-02T00:00+00:00"}
    # supersedes aside: naming another node closes that node's validity (test_write.py)
    assert set(changed) | {"supersedes"} == set(node.WRITTEN_FIELDS)
    edited = eng.update_node("New limit", NodeEdit(**changed))
    after = front_matter(vault, edited.path)
    key_of = {node.field_name(key): key for key in node.KEYS}
    assert {name: after[key_of[name]] for name in changed} == changed


def test_a_node_s_read_shows_front_matter_by_the_fields_the_keys_name():
    shown = names(NodeRead) & {node.field_name(k) for k in node.KEYS}
    assert shown == {"id", "created", "updated", "author", "drafter", "summary", "derived_from",
                     "conflicts", "trust"}  # the valid time and supersedes are not on a page
    assert set(NodeOut.model_fields) <= names(NodeRead)  # the tool's answer is built from it
