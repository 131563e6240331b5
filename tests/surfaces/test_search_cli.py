"""`osk import` and `osk search` as a person runs them: real processes, a real vault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from osk.store.vault import Vault


def osk(vault: Vault, *args: str, cwd: Path, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "osk", "--vault", str(vault.root), *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, encoding="utf-8",
    )


def line(**fields: object) -> str:
    return json.dumps(fields, ensure_ascii=False)


def test_import_loads_valid_lines_reports_each_rejected_one_and_search_finds_them(
        vault: Vault, tmp_path: Path):
    source = tmp_path / "nodes.jsonl"
    source.write_text("\n".join([
        line(title="Release steps", summary="How alpha ships.", body="Tag, build, upload.",
             space="scope", scope="alpha"),
        line(title="Bad: title", summary="x", body="y", space="domain"),
        line(title="Cites a later line", summary="Depends on the glossary.",
             body="See the glossary.", space="domain", derived_from=["Glossary"]),
        "{not json",
        line(title="Glossary", summary="Words we use.", body="A walrus is a big seal.",
             space="domain", id="d-1", lang="en"),
        line(title="Orphan", summary="x", body="y", space="domain", derived_from=["Nowhere"]),
        line(title="Needs a scope", summary="x", body="y", space="scope"),
        line(title="배포 절차", summary="한국어 노트", body="배포는 태그를 붙여서 한다.",
             space="person"),
    ]) + "\n", encoding="utf-8")
    done = osk(vault, "import", str(source), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Imported 4 node(s)" in done.stdout
    rejected = [row for row in done.stderr.splitlines() if "rejected" in row]
    assert [row.split(":")[0] for row in rejected] == [
        "line 4", "line 7", "line 2", "line 6"]  # unreadable lines first, then write refusals
    assert "contains ':'" in done.stderr and "Nowhere" in done.stderr
    assert "importing:" in done.stderr  # the progress report
    found = osk(vault, "search", "walrus seal", "--json", cwd=tmp_path)
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["title"] == "Glossary" and hits[0]["space"] == "Domain"
    korean = osk(vault, "search", "배포", "--json", cwd=tmp_path)
    assert [h["title"] for h in json.loads(korean.stdout)["hits"]] == ["배포 절차"]


def test_search_from_another_scope_cannot_see_a_projects_nodes_until_it_is_shared(
        vault: Vault, tmp_path: Path):
    source = tmp_path / "nodes.jsonl"
    source.write_text(line(title="Alpha secret", summary="Alpha only.",
                           body="the pangolin protocol", space="scope", scope="alpha") + "\n",
                      encoding="utf-8")
    assert osk(vault, "import", str(source), cwd=tmp_path).returncode == 0
    own = osk(vault, "search", "pangolin", "--scope", "alpha", cwd=tmp_path)
    assert "Alpha secret" in own.stdout
    other = osk(vault, "search", "pangolin", "--scope", "beta", "--json", cwd=tmp_path)
    assert json.loads(other.stdout)["hits"] == []
    settings = vault.root / "osk.toml"
    settings.write_text(settings.read_text("utf-8").replace(
        "shared_scopes = []", 'shared_scopes = ["alpha"]'), "utf-8")
    shared = osk(vault, "search", "pangolin", "--scope", "beta", "--json", cwd=tmp_path)
    assert [h["title"] for h in json.loads(shared.stdout)["hits"]] == ["Alpha secret"]


def test_an_unreadable_import_file_is_a_clear_error_and_imports_nothing(
        vault: Vault, tmp_path: Path):
    undecodable = tmp_path / "latin1.jsonl"
    undecodable.write_bytes(line(title="Caf\u00e9", summary="x", body="y",
                                 space="domain").encode("latin-1"))
    for name, reason in ((tmp_path / "missing.jsonl", "No such file or directory"),
                         (tmp_path, "Is a directory"),
                         (undecodable, "'utf-8' codec can't decode")):
        done = osk(vault, "import", str(name), cwd=tmp_path)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith(f"Error: cannot read {name}: {reason}")
        assert "nothing was imported" in done.stderr and "Traceback" not in done.stderr
    found = osk(vault, "search", "Café", "--json", cwd=tmp_path)
    assert json.loads(found.stdout)["hits"] == []


def test_import_from_standard_input_reads_it_as_a_file_crlf_and_a_late_cited_line_too(
        vault: Vault, tmp_path: Path):
    """`osk import -` reads the lines from standard input (spooled: the import reads them
    twice), with CRLF line ends, and a line citing a later one waits for it; a line that is
    not UTF-8 there refuses the whole input before anything is written."""
    text = "\r\n".join([
        line(title="Uses the otter", summary="x", body="See the otter.", space="domain",
             derived_from=["Otter facts"]),
        "",
        line(title="Otter facts", summary="Otters.", body="An otter holds hands.",
             space="domain"),
        "[1, 2]",
    ]) + "\r\n"
    done = osk(vault, "import", "-", "--json", cwd=tmp_path, stdin=text)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert sorted((c["line"], c["title"]) for c in report["created"]) == [
        (1, "Uses the otter"), (3, "Otter facts")]
    assert [r["line"] for r in report["rejected"]] == [4]
    undecodable = subprocess.run(
        [sys.executable, "-m", "osk", "--vault", str(vault.root), "import", "-"], cwd=tmp_path,
        input=line(title="Caf\u00e9 notes", summary="x", body="y", space="domain")
        .encode("latin-1"), capture_output=True)
    assert undecodable.returncode == 1 and undecodable.stdout == b""
    assert b"cannot read -: 'utf-8' codec can't decode" in undecodable.stderr
    assert b"nothing was imported" in undecodable.stderr
    found = osk(vault, "search", "Caf\u00e9", "--json", cwd=tmp_path)
    assert json.loads(found.stdout)["hits"] == []


def test_search_k_defaults_to_8_is_capped_at_50_and_below_1_is_refused(
        vault: Vault, tmp_path: Path):
    source = tmp_path / "many.jsonl"
    source.write_text("\n".join(line(title=f"Walrus fact {i}", summary="walrus", body="walrus",
                                     space="domain") for i in range(60)) + "\n",
                      encoding="utf-8")
    assert osk(vault, "import", str(source), cwd=tmp_path).returncode == 0

    def count(*extra: str) -> int:
        done = osk(vault, "search", "walrus", "--json", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return len(json.loads(done.stdout)["hits"])

    assert (count(), count("--k", "3"), count("--k", "70")) == (8, 3, 50)
    refused = osk(vault, "search", "walrus", "--k", "0", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr == "Error: k must be a whole number from 1 to 50 (got 0) (rule: search)\n"


# What only a write needs: the write path, the capture path and the secret filter they apply,
# the audit log, the person's verbs, the command groups a search does not run, the reads a
# search does not make (raw records, a past date, the overview), and the node contract's model
# and YAML reader (a node restored from the catalog snapshot needs neither).
WRITE_PATH = frozenset({
    "pydantic", "yaml", "osk.store.contract",
    "osk.writes.write", "osk.capture.raw", "osk.capture.raw_review", "osk.capture.secrets",
    "osk.reads.raw_reads", "osk.reads.as_of", "osk.reads.overview",
    "osk.authority.audit", "osk.authority.tombstones",
    "osk.provenance.scope_memory", "osk.store.conflict_copies", "osk.authority.validity",
    "osk.verbs.importer", "osk.writes.placement", "osk.writes.citations",
    "osk.writes.recheck_gate", "osk.writes.moves",
    "osk.authority.approvals",
    "osk.surfaces.commands.authority", "osk.surfaces.commands.hosts", "osk.surfaces.commands.nodes",
    "osk.surfaces.commands.sync", "osk.surfaces.commands.import_", "osk.surfaces.commands.mcp",
    "osk.surfaces.commands.vault", "osk.surfaces.commands.redact", "osk.surfaces.commands.demo",
})


def _settled(*spaces: Path) -> None:
    """Wait until a look may vouch for every folder under ``spaces``: one that lists a folder
    within its race window of the folder's last change (100 ms where timestamps are fine, its
    ctime included) records no look (``osk.store.freshness``), so the next fresh search would
    open the engine, and a first search can start that soon after the import made them."""
    from osk.store.freshness import FINE_RACE_NS, RACE_NS

    folders = [folder for space in spaces for folder in (space, *space.glob("**/"))]
    changed = max(max(folder.stat().st_mtime_ns, folder.stat().st_ctime_ns)
                  for folder in folders)
    window = FINE_RACE_NS if changed % 10_000_000 else RACE_NS
    time.sleep(max(0.0, (changed + window - time.time_ns()) / 1e9) + 0.01)


def test_a_fresh_osk_search_imports_no_write_path(vault: Vault, tmp_path: Path):
    source = tmp_path / "nodes.jsonl"
    source.write_text("\n".join([
        line(title="Walrus habits", summary="Where walruses rest.", body="walrus on ice",
             space="domain"),
        line(title="Walrus diet", summary="What they eat.", body="walrus and clams",
             space="person"),
    ]) + "\n", encoding="utf-8")
    assert osk(vault, "import", str(source), cwd=tmp_path).returncode == 0
    for path in (*vault.root.glob("Domain/**/*.md"), *vault.root.glob("Person/**/*.md")):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 3600 * 10**9))
    _settled(vault.root / "Domain", vault.root / "Person")
    script = (
        "import json, sys\n"
        "from osk.surfaces.cli import main\n"
        f"code = main(['--vault', {str(vault.root)!r}, 'search', 'walrus', '--json'])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    # The first run re-reads the files (their stat changed above); the next finds the index
    # and the catalog snapshot current, as every later run does.
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                              text=True, encoding="utf-8")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stderr.strip().splitlines()[-1])
        hits = json.loads(done.stdout)["hits"]
        assert report["code"] == 0
        # the person imported both: confirmed, so the Person node's trust marker is none
        assert {h["title"]: h["markers"] for h in hits} == {
            "Walrus habits": [], "Walrus diet": []}
    assert sorted(WRITE_PATH & set(report["modules"])) == []


# The first process after an import reads its nodes from the catalog snapshot and the index:
# a node file it opens is one it shows (a hit's steering marker reads its text).
OPENS = (
    "import json, os, sys\n"
    "opened = []\n"
    "def look(event, args):\n"
    "    if event == 'open' and isinstance(args[0], str) and args[0].endswith('.md'):\n"
    "        opened.append(os.path.realpath(args[0]))\n"
    "sys.addaudithook(look)\n"
    "from osk.surfaces.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps({'code': code, 'opened': opened}), file=sys.stderr)\n"
)


def test_the_first_process_after_an_import_reads_no_node_file_it_does_not_show(
        vault: Vault, tmp_path: Path, monkeypatch):
    import osk.engine.core
    from osk.surfaces.cli import main

    monkeypatch.setattr(osk.engine.core, "SETTLE_FILES", 0)  # wait out even one racy file
    monkeypatch.chdir(tmp_path)
    words = ["walrus", "otter", "heron", "badger", "lynx", "stoat", "marten", "ibis"]
    lines = [line(title=f"Note {n}", summary=f"About the {word}.", body=f"The {word} rests.",
                  space="domain", cluster="animals",
                  **({"derived_from": [f"Note {n - 1}"]} if n else {}))  # citations: the engine
             for n, word in enumerate(words)]
    source = tmp_path / "nodes.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["--vault", str(vault.root), "import", str(source)]) == 0
    done = subprocess.run([sys.executable, "-c", OPENS, "--vault", str(vault.root), "search",
                           "heron", "--json"], cwd=tmp_path, capture_output=True, text=True,
                          encoding="utf-8")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stderr.strip().splitlines()[-1])
    shown = {os.path.realpath(vault.root / hit["path"]) for hit in json.loads(done.stdout)["hits"]}
    assert report["code"] == 0 and len(shown) == 1
    assert set(report["opened"]) <= shown
