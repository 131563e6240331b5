"""`osk review --new`: what agents wrote since the person's last review, kept, rejected or
edited at a terminal; and `[review] hold`, which keeps new agent nodes out of recall and the
session-start digest until then while search finds them marked pending-review.

Agents write through the real engine; hooks run as the hosts run them; the person's command
runs in a real process on a real pseudo-terminal (``authority_support.osk``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from authority_support import osk
from recallkit import FACT, prompt, start, write
from recallkit import recall_log as log

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.errors import TombstoneError
from osk.store.vault import Vault

ASK = "how are release tags signed, minisign or gpg?"


def hold(vault: Vault, *scopes: str) -> None:
    with open(vault.root / "osk.toml", "a", encoding="utf-8") as handle:
        handle.write(f"\n[review]\nhold = {json.dumps(list(scopes))}\n")


def test_a_held_scopes_new_agent_node_is_not_injected_until_kept(eng, vault, project,
                                                                  tmp_path):
    hold(vault, eng.scope)
    node_id = write(eng, *FACT)
    assert prompt("claude", project, ASK, "p-1", tmp_path) == ""
    (receipt,) = log(vault, project)
    assert {h["id"]: h["reason"] for h in receipt["held"]}[node_id] == "pending"
    assert f"id {node_id}" not in start("codex", project, tmp_path)  # nor in the digest
    hits = json.loads(osk(vault, "search", "minisign", "--scope", eng.scope, "--json").out)
    (hit,) = [h for h in hits["hits"] if h["id"] == node_id]
    assert "pending-review" in hit["markers"]  # search still finds it, marked

    listed = json.loads(osk(vault, "review", "--new", "--json").out)
    assert [w["node_id"] for w in listed if w["title"] == FACT[0]] == [node_id]
    done = osk(vault, "review", "--new", tty=True, answer="k\nk\n")
    assert done.code == 0, done.err
    assert FACT[0] in done.out and "Kept." in done.out and "+++ " in done.out

    assert f"id {node_id}" in prompt("claude", project, ASK, "p-2", tmp_path)
    hits = json.loads(osk(vault, "search", "minisign", "--scope", eng.scope, "--json").out)
    assert all("pending-review" not in h["markers"] for h in hits["hits"])
    assert json.loads(osk(vault, "review", "--new", "--json").out) == []


def test_an_agents_change_to_a_kept_node_is_new_again(eng, vault, project, tmp_path):
    from osk.calls.request import NodeEdit

    hold(vault, eng.scope)
    node_id = write(eng, *FACT)
    assert osk(vault, "review", "--new", tty=True, answer="k\nk\n").code == 0
    eng.update_node(FACT[0], NodeEdit(summary="Release tags are signed with minisign only."))
    (again,) = json.loads(osk(vault, "review", "--new", "--json").out)
    assert again["node_id"] == node_id
    changed = [line for line in again["diff"].splitlines() if "summary:" in line]
    assert [line[0] for line in changed] == ["-", "+"]  # the summary, and nothing else
    assert FACT[1] in changed[0] and "minisign only." in changed[1]
    assert prompt("claude", project, ASK, "p-1", tmp_path) == ""  # held again


def test_a_rejected_node_is_not_written_again_by_the_same_agent_text(eng, vault):
    write(eng, *FACT)
    done = osk(vault, "review", "--new", tty=True, answer="s\nr\nwe sign with sigstore now\n")
    assert done.code == 0, done.err
    assert "Rejected: tombstone" in done.out
    agent = Engine.open(vault, cwd=eng.session.key.repo_root)
    with pytest.raises(TombstoneError, match="we sign with sigstore now"):
        agent.create_node(NewNode(FACT[0], FACT[1], FACT[2], space="Scope", cluster="release",
                                  drafter="test-model"))


def test_the_person_edits_a_new_node_and_their_version_is_kept(eng, vault, tmp_path):
    node_id = write(eng, *FACT)
    editor = tmp_path / "editor.py"
    editor.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
                      "p.write_text(p.read_text().replace('minisign', 'sigstore'))\n",
                      encoding="utf-8")
    done = osk(vault, "review", "--new", tty=True, answer="s\ne\n",
               env={"EDITOR": f"{sys.executable} {editor}"})
    assert done.code == 0, done.err
    assert "Edited and kept." in done.out
    fresh = Engine.open(vault, cwd=eng.session.key.repo_root)
    page = fresh.read_node(node_id)
    assert "sigstore" in page.text and "minisign" not in page.text
    assert [e["action"] for e in json.loads(osk(vault, "log", node_id, "--json").out)][-1:] \
        == ["update"]  # the person's write, in the audit log
    assert [w["title"] for w in json.loads(osk(vault, "review", "--new", "--json").out)] == [
        "release"]  # only the hub is left


def test_deciding_is_refused_from_a_script_and_listing_works_anywhere(eng, vault):
    write(eng, *FACT)
    refused = osk(vault, "review", "--new")
    assert refused.code != 0
    assert refused.err.startswith("Error: `osk review --new` is reserved for a person at a "
                                  "terminal")
    listed = json.loads(osk(vault, "review", "--new", "--json").out)
    assert {w["title"] for w in listed} == {"release", FACT[0]}
    assert all(actor.startswith("agent") for w in listed for actor in w["actors"])
    fact = next(w for w in listed if w["title"] == FACT[0])
    assert fact["diff"].startswith("--- /dev/null")


def test_a_bad_hold_setting_is_named(eng, vault, project, tmp_path):
    with open(vault.root / "osk.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[review]\nhold = \"shop\"\n")
    done = osk(vault, "review", "--new", "--json")
    assert done.code != 0 and "[review] hold must be a list of scope names" in done.err


def test_person_written_nodes_are_never_new(vault: Vault, tmp_path: Path):
    from writekit import make_repo

    person = Engine.open(vault, cwd=make_repo(tmp_path / "work" / "mine"), actor="user")
    person.create_node(NewNode("notes", "Hub.", "Hub.\n", space="Scope", cluster="notes",
                               drafter="me"))
    assert json.loads(osk(vault, "review", "--new", "--json").out) == []
