"""Writers killed with SIGKILL inside the search index's own writes (issue 26).

A node write's last step hands the change to the index, which commits it to the recall file,
its one store, in one SQLite transaction. A real child process kills itself inside that
transaction before it commits, and right after it commits; and a real `osk import` is killed
at seeded random moments (``OSK_CRASH_TRIALS`` trials, 3 in CI). Afterwards the next open must
mend what was cut short: the index it loads, the recall file a fresh `osk search` ranks from,
and the files agree, and a fresh search finds the node written. A write that replaces a
version the index loaded removes that version's postings by the terms the recall file holds
for it, the file the same commit changes: there the next open must also leave exactly the
postings of an index built afresh.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from writekit import import_command, killed_imports

from osk.engine.core import Engine
from osk.search import SearchIndex, recallfile
from osk.store import fsutil
from osk.store.catalog import Catalog
from osk.store.vault import Vault
from osk.verbs import validate

pytestmark = [pytest.mark.crash,
              pytest.mark.skipif(os.name == "nt", reason="SIGKILL is POSIX")]

CHILD = r'''
import os, signal, sys
from pathlib import Path
from osk.engine.core import Engine
from osk.calls.request import NewNode
from osk.search import recallfile

vault, point = sys.argv[1:3]
armed = False

def die():
    os.kill(os.getpid(), signal.SIGKILL)

real_mirror = recallfile.RecallWriter.mirror
def mirror(self, ops, meta, **counts):
    versions = real_mirror(self, ops, meta, **counts)
    if armed and point == "after-recall":
        die()  # committed: nothing after the commit is needed
    return versions
recallfile.RecallWriter.mirror = mirror

real_put = recallfile._put
def put(db, lengths, doc, frequencies, *, path=""):
    real_put(db, lengths, doc, frequencies, path=path)
    if armed and point == "inside-recall":
        die()  # rows written inside the transaction, never committed
recallfile._put = put

eng = Engine.open(vault, cwd=Path(vault), actor="user")
eng.create_node(NewNode("animals", "What animals do", "The animals cluster.\n",
                        space="Domain", cluster="animals", drafter="test"))
eng.search("animals")  # the index exists and follows every write from here
armed = True
eng.create_node(NewNode("Narwhal tusks", "Tusks", "The narwhal tusk is a tooth.\n",
                        space="Domain", cluster="animals", drafter="test"))
print("NOT KILLED", flush=True)
'''


def agreement(vault: Vault) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]],
                                     dict[str, tuple[int, ...]]]:
    """(node files on disk, what the index holds, what the recall file holds): path -> stat."""
    catalog = Catalog(vault)
    catalog.refresh()
    files = {node.path: tuple(catalog.entries[node.path].stat) for node in catalog.nodes()}
    index = SearchIndex(vault)
    held = {rel: tuple(doc.stat) for rel in files if (doc := index.doc(rel)) is not None}
    extra = len(index) - len(held)  # documents for files that are gone
    db = recallfile.open_reader(vault.state("index"))
    try:
        mirrored = {path: (size, mtime, ino) for path, size, mtime, ino in
                    db.execute("SELECT path, size, mtime_ns, ino FROM docs")}
    finally:
        db.close()
    assert extra == 0
    return files, held, mirrored


def fresh_search(vault: Vault, query: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "search",
                           query, "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OSK_SEMANTIC": "0"})
    assert done.returncode == 0, done.stderr
    return [hit["title"] for hit in json.loads(done.stdout)["hits"]]


@pytest.mark.parametrize("point", ["inside-recall", "after-recall"])
def test_a_writer_killed_inside_the_index_write_is_mended_by_the_next_open(
        vault: Vault, point: str):
    done = subprocess.run([sys.executable, "-c", CHILD, str(vault.root), point],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr)
    assert (vault.root / "Domain/animals/Narwhal tusks.md").exists()  # the write itself landed
    assert fresh_search(vault, "narwhal") == ["Narwhal tusks"]
    files, held, mirrored = agreement(vault)
    assert held == files and mirrored == files
    assert fresh_search(vault, "narwhal tooth") == ["Narwhal tusks"]


def test_osk_import_killed_at_random_moments_leaves_index_and_files_agreeing(
        vault: Vault, tmp_path: Path):
    lines = tmp_path / "nodes.jsonl"
    lines.write_text("\n".join(json.dumps({
        "title": f"Imported {i:04d}", "summary": "Loaded in bulk.",
        "body": f"walrus number w{i:04d} rests on the ice", "space": "domain",
        "cluster": "imports"}) for i in range(120)) + "\n", encoding="utf-8")
    command = import_command(vault, lines)
    for _ in killed_imports(command, seed=20261203, latest=1.5):
        Engine.open(vault, cwd=tmp_path, actor="user").search("walrus")  # the next open
        files, held, mirrored = agreement(vault)
        assert held == files and mirrored == files
    subprocess.run(command, capture_output=True, timeout=300)  # the rest (the others: taken)
    files, held, mirrored = agreement(vault)
    assert held == files and mirrored == files
    assert len(files) == 121  # every line and the cluster's hub
    assert fresh_search(vault, "w0119") == ["Imported 0119"]


CHILD_UPDATE = r'''
import os, signal, sys
from pathlib import Path
from osk.engine.core import Engine
from osk.calls.request import NodeEdit
from osk.search import recallfile

vault, point = sys.argv[1:3]
armed = False

def die():
    os.kill(os.getpid(), signal.SIGKILL)

real_mirror = recallfile.RecallWriter.mirror
def mirror(self, ops, meta, **counts):
    versions = real_mirror(self, ops, meta, **counts)
    if armed and point == "after-recall":
        die()  # the recall file holds the change
    return versions
recallfile.RecallWriter.mirror = mirror

real_put = recallfile._put
def put(db, lengths, doc, frequencies, *, path=""):
    real_put(db, lengths, doc, frequencies, path=path)
    if armed and point == "inside-recall":
        die()
recallfile._put = put

eng = Engine.open(vault, cwd=Path(vault), actor="user")
eng.search("narwhal")  # the node is a version the index loaded: its terms are not held here
armed = True
eng.update_node("Narwhal tusks", NodeEdit(old_text="is a tooth", new_text="is ivory"))
print("NOT KILLED", flush=True)
'''


@pytest.mark.parametrize("point", ["inside-recall", "after-recall"])
def test_a_writer_killed_while_it_replaces_a_loaded_version_leaves_exact_postings(
        vault: Vault, point: str):
    # The replaced version's terms come from the recall file, which the same commit then
    # changes: whichever side of it the writer dies on, the next open removes exactly them.
    from test_index_terms import postings_by_path

    from osk.calls.request import NewNode

    engine = Engine.open(vault, cwd=vault.root, actor="user")
    engine.create_node(NewNode("animals", "What animals do", "The animals cluster.\n",
                               space="Domain", cluster="animals", drafter="test"))
    engine.create_node(NewNode("Narwhal tusks", "Tusks", "The narwhal tusk is a tooth.\n",
                               space="Domain", cluster="animals", drafter="test"))
    engine.search("narwhal")  # both nodes committed: the child loads them from the store
    done = subprocess.run([sys.executable, "-c", CHILD_UPDATE, str(vault.root), point],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr)
    after = SearchIndex(vault, refresh_interval=0.0)  # the next open
    assert [hit.title for hit in after.search("tooth")] == []
    assert [hit.title for hit in after.search("ivory")] == ["Narwhal tusks"]
    files, held, mirrored = agreement(vault)
    assert held == files and mirrored == files
    assert fresh_search(vault, "ivory") == ["Narwhal tusks"]
    assert fresh_search(vault, "tooth") == []
    rebuilt = SearchIndex(vault)  # last: it writes the index anew
    rebuilt.rebuild()
    assert postings_by_path(after) == postings_by_path(rebuilt)


CHILD_BUILD = r'''
import os, signal, sys
from pathlib import Path
from osk.engine.core import Engine
from osk.calls.request import NewNode
from osk.search import SearchIndex, bulk_build, recallfile

vault, how = sys.argv[1:3]
eng = Engine.open(vault, cwd=Path(vault), actor="user")
eng.create_node(NewNode("animals", "What animals do", "The animals cluster.\n",
                        space="Domain", cluster="animals", drafter="test"))
for name in ("Narwhal tusks", "Walrus tusks", "Beluga songs"):
    eng.create_node(NewNode(name, "Whales", f"The {name.lower()} are studied.\n",
                            space="Domain", cluster="animals", drafter="test"))
recallfile.RecallBuild.BATCH = 1  # each document goes into the new file as it is read
puts = 0
real_put = recallfile.RecallBuild.put
def put(self, slot, doc, terms):
    global puts
    real_put(self, slot, doc, terms)
    puts += 1
    if puts == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # halfway through a full build
recallfile.RecallBuild.put = put
bulk_build.RUN_POSTINGS = 1  # a run written for each document
index = SearchIndex(Engine.open(vault, cwd=Path(vault), actor="user").vault)
index.rebuild() if how == "in-memory" else index.build_on_disk({}, None)
print("NOT KILLED", flush=True)
'''


@pytest.mark.parametrize("how", ["in-memory", "on-disk"])
def test_a_full_build_killed_midway_leaves_only_a_temp_file_and_the_next_open_mends_it(
        vault: Vault, how: str):
    """A full build (``osk reindex``, the end of ``osk import``) writes each document into a
    new recall file as it reads the vault: killed halfway, it leaves that file under a temp
    name (no SQLite journal beside it, which nothing would remove); the next open removes it,
    however soon after the killed build's own open (the rest of device state is swept hourly),
    and finds the index and the files agreeing. Built on disk (``osk import`` into a vault
    with no index), its runs and records are in files the system removes with the process."""
    done = subprocess.run([sys.executable, "-c", CHILD_BUILD, str(vault.root), how],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr)
    left = [path.name for path in vault.state("index").iterdir()]
    debris = [name for name in left if name.startswith(".")]
    assert debris and all(fsutil.is_temp_name(name) for name in debris), left
    Engine.open(vault, cwd=vault.root, actor="user").search("tusks")  # the next open
    assert not [path for path in vault.state("index").iterdir() if path.name in debris]
    assert [f for f in validate.run(vault) if f.rule == "crash-debris"] == []
    files, held, mirrored = agreement(vault)
    assert held == files and mirrored == files and len(files) == 4
    assert fresh_search(vault, "walrus") == ["Walrus tusks"]
