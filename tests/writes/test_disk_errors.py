"""A full, read-only or forbidden disk is named as such (DiskError: the cause and the path inside
the vault), never reported as a bug in osk; a call is reported as failed only when it did not
land; temp files a failed or killed write left in device state are counted and swept.

Two ways in: a failing-write shim (always), and a real tmpfs vault that is filled up or
remounted read-only (only where the test may mount one: root on Linux; skipped elsewhere)."""

from __future__ import annotations

import errno
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from hookkit import copy_fixture, make_project, payload, run_hook
from mcp import StdioServerParameters
from writekit import sqlite_disk_full

from osk.calls.request import NewNode
from osk.capture import raw
from osk.engine.core import Engine
from osk.errors import DiskError
from osk.hooks import main as hook_main
from osk.store.vault import Vault, disk_error, init
from osk.surfaces.cli import main
from osk.verbs import validate

HUB = NewNode("auth", "What we know about auth", "The auth hub.\n", space="Scope",
              cluster="auth", drafter="test-model")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "work" / "shop")


# -- the error itself ---------------------------------------------------------------------------
@pytest.mark.parametrize(("code", "cause"), [
    (errno.ENOSPC, "the disk holding the vault is full (ENOSPC"),
    (errno.EDQUOT, "the disk quota for the vault is used up (EDQUOT"),
    (errno.EROFS, "the vault is on a read-only file system (EROFS"),
    (errno.EACCES, "permission denied (EACCES"),
])
def test_each_disk_cause_is_named_with_the_path_inside_the_vault(vault: Vault, code: int,
                                                                 cause: str):
    failure = OSError(code, os.strerror(code), str(vault.state("locks", "vault-mutation.lock")))
    error = disk_error(failure)
    assert isinstance(error, DiskError) and error.rule == "disk"
    assert str(error).startswith(cause)
    assert "at .osk/locks/vault-mutation.lock" in str(error)
    assert str(vault.root) not in str(error)


def test_sqlites_words_for_a_full_or_read_only_disk_are_disk_errors():
    import sqlite3

    full = disk_error(sqlite3.OperationalError("database or disk is full"))
    assert full is not None and str(full).startswith("the disk holding the vault is full")
    read_only = disk_error(sqlite3.OperationalError("attempt to write a readonly database"))
    assert read_only is not None and "read-only file system (EROFS)" in str(read_only)
    assert disk_error(sqlite3.OperationalError("no such table: rounds")) is None


def test_sqlites_disk_io_error_is_a_disk_error_when_its_disk_is_full_or_read_only(
        tmp_path: Path, monkeypatch):
    import sqlite3

    io_error = sqlite3.OperationalError("disk I/O error")  # the WAL's files could not be made
    store = tmp_path / "store.sqlite"
    assert disk_error(io_error) is None  # no file named: nothing to ask
    assert disk_error(io_error, sqlite_file=store) is None  # a disk with room: another fault

    def disk(free_blocks: int, flag: int = 0) -> os.statvfs_result:  # 4 KiB blocks
        return os.statvfs_result((4096, 4096, 1000, free_blocks, free_blocks, 10, 5, 5, flag,
                                  255))

    monkeypatch.setattr(os, "statvfs", lambda path: disk(3))
    full = disk_error(io_error, sqlite_file=store)
    assert full is not None and str(full).startswith("the disk holding the vault is full")
    monkeypatch.setattr(os, "statvfs", lambda path: disk(500, os.ST_RDONLY))
    read_only = disk_error(io_error, sqlite_file=store)
    assert read_only is not None and "read-only file system (EROFS" in str(read_only)
    monkeypatch.setattr(os, "statvfs", lambda path: disk(500))
    assert disk_error(io_error, sqlite_file=store) is None


def test_other_os_errors_are_not_disk_errors():
    assert disk_error(OSError(errno.EIO, "I/O error")) is None
    assert disk_error(ValueError("no")) is None


# -- surfaces, through a shim ---------------------------------------------------------------------
def _full_disk(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", "/nowhere/in/particular")


def test_the_cli_names_a_full_disk_instead_of_a_traceback(vault: Vault, project: Path,
                                                          monkeypatch, capsys):
    node = vault.root / "Scope" / "shop" / "auth" / "auth.md"
    monkeypatch.chdir(project)

    def fail(self: Engine, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(node))

    monkeypatch.setattr(Engine, "search", fail)
    assert main(["search", "auth"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: the disk holding the vault is full (ENOSPC, at "
                          "Scope/shop/auth/auth.md)")
    assert "(rule: disk)" in err and "Traceback" not in err


def test_a_hook_on_a_full_disk_says_so_in_one_line_and_exits_zero(vault: Vault, monkeypatch,
                                                                  capsys):
    def fail(*_args: object) -> str:
        raise OSError(errno.EROFS, "Read-only file system", str(vault.state("hooks", "x")))

    monkeypatch.setattr(hook_main, "dispatch", fail)
    monkeypatch.setattr(hook_main, "read_stdin", lambda: {})
    assert hook_main.run(["stop", "--host", "claude", "--vault", str(vault.root)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the vault is on a read-only file system (EROFS, at .osk/hooks/x)" in err


# -- append_raw: failed only when the round did not land ----------------------------------------
def test_a_round_that_landed_is_reported_as_landed_when_its_device_state_cannot_be_written(
        vault: Vault, project: Path, monkeypatch):
    eng = Engine.open(vault, cwd=project)
    first = eng.append_raw("conv", user="hello", assistant="hi", completion="c-1")
    monkeypatch.setattr(raw, "save_state", _full_disk)
    second = eng.append_raw("conv", user="again", assistant="yes", completion="c-2")
    assert (second.number, second.duplicate) == (first.number + 1, False)
    assert "again" in vault.abs(second.path).read_text(encoding="utf-8")
    monkeypatch.undo()
    retry = eng.append_raw("conv", user="again", assistant="yes", completion="c-2")
    assert retry.duplicate and retry.number == second.number  # captured once, not twice
    third = eng.append_raw("conv", user="third", assistant="ok", completion="c-3")
    assert third.number == second.number + 1


def test_a_round_the_disk_could_not_take_leaves_the_record_as_it_was(vault: Vault,
                                                                     project: Path,
                                                                     monkeypatch):
    eng = Engine.open(vault, cwd=project)
    first = eng.append_raw("conv", user="hello", assistant="hi", completion="c-1")
    path = vault.abs(first.path)
    before = path.read_bytes()
    real = raw._write_all

    def half_then_full(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(raw, "_write_all", half_then_full)
    with pytest.raises(OSError) as caught:
        eng.append_raw("conv", user="lost", assistant="never", completion="c-2")
    assert caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == before, "half a round stayed in the record"
    monkeypatch.undo()
    again = eng.append_raw("conv", user="lost", assistant="never", completion="c-2")
    assert (again.number, again.duplicate) == (first.number + 1, False)


# -- stale temp files in device state -----------------------------------------------------------
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temp_files_in_device_state_are_counted_then_swept_on_open(vault: Vault,
                                                                         project: Path):
    dead = _dead_pid()
    stale = [vault.state(f".{dead}.settings.json.tmp"),
             vault.state("raw", "shop", f".conv.json.{dead}.tmp"),  # an older version's name
             vault.state("index", f".{dead}.recall.sqlite.tmp")]
    live = vault.state("raw", f".{os.getpid()}.conv.json.tmp")
    for path in [*stale, live]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    found = [f for f in validate.run(vault) if f.rule == validate.DEBRIS_RULE]
    assert len(found) == 1 and found[0].path == ".osk"
    assert found[0].message.startswith("3 temporary file(s) in device state")
    Engine.open(vault, cwd=project)
    assert not any(p.exists() for p in stale)
    assert live.exists(), "a live writer's temp file was removed"
    assert not [f for f in validate.run(vault) if f.rule == validate.DEBRIS_RULE]


def test_a_cache_write_the_disk_refuses_leaves_no_temp_file(tmp_path: Path, monkeypatch):
    from osk.store import fsutil

    monkeypatch.setattr(os, "replace", _full_disk)
    with pytest.raises(OSError):
        fsutil.replace_unsynced(tmp_path / "state.json", "{}")
    assert os.listdir(tmp_path) == []


# -- the search caches on a full disk: behind, kept, caught up once the disk takes writes ---------
def test_a_round_the_rounds_index_cannot_take_leaves_the_rounds_it_holds_found(vault: Vault,
                                                                              project: Path,
                                                                              caplog):
    engine = Engine.open(vault, cwd=project)
    engine.append_raw("talk", user="the NAS login moved to the tulip orbit host", assistant="Ok.")
    first = "_raw/shop/talk#Round 1"
    assert [hit.id for hit in engine.search("tulip orbit", k=5).hits] == [first]
    longer = " ".join(f"printerword{n}" for n in range(3000))  # more than a page of postings
    engine.append_raw("talk", user=f"the printer jams on tray two {longer}", assistant="Ok.")
    with sqlite_disk_full("rounds.sqlite"):
        hits = [hit.id for hit in engine.search("tulip orbit printer jams", k=5).hits]
    assert hits == [first]  # not a failed call, and not nothing
    assert "raw rounds captured since the index last took them are left out of search: the " \
           "disk holding the vault is full (ENOSPC" in caplog.text
    caught_up = [hit.id for hit in engine.search("printer jams", k=5).hits]
    assert caught_up[0] == "_raw/shop/talk#Round 2"  # (its neighbour after it, by context)


# -- a real full or read-only tmpfs (where this test may mount one) -----------------------------
@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "mnt"
    mount.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root on Linux); the shim tests cover it")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _params(vault: Vault, cwd: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k != "OSK_VAULT"}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "osk", "mcp", "--vault", str(vault.root)],
                                 env=env, cwd=str(cwd))


def test_the_real_server_names_a_full_then_read_only_disk(tmpfs: Path, project: Path):
    vault = init(tmpfs / "vault")

    async def scenario() -> None:
        async with mcp.Client(_params(vault, project), mode="legacy") as client:
            made = await client.call_tool("create_node", {
                "title": "auth", "summary": "Auth", "body": "The auth hub.\n",
                "space": "scope", "cluster": "auth", "drafter": "test-model"})
            assert not made.is_error, made.content[0].text
            _fill(tmpfs)
            full = await client.call_tool("create_node", {
                "title": "Tokens", "summary": "Tokens", "body": "Rotate them.\n" * 2000,
                "space": "scope", "cluster": "auth", "drafter": "test-model"})
            text = full.content[0].text
            assert full.is_error and "the disk holding the vault is full (ENOSPC, at " in text, text
            assert "internal error" not in text and str(tmpfs) not in text
            found = await client.call_tool("search", {"query": "auth"})
            assert not found.is_error, found.content[0].text
        (tmpfs / "filler").unlink()
        subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
        async with mcp.Client(_params(vault, project), mode="legacy") as client:
            refused = await client.call_tool("append_raw", {
                "conversation": "c1", "user": "hello", "assistant": "hi"})
            text = refused.content[0].text
            assert refused.is_error and "read-only file system (EROFS, at .osk/" in text, text
            found = await client.call_tool("search", {"query": "auth"})
            assert not found.is_error, found.content[0].text

    anyio.run(scenario)


def test_the_real_server_on_a_full_disk_still_finds_the_rounds_its_index_holds(tmpfs: Path,
                                                                               project: Path):
    vault = init(tmpfs / "vault")
    params = _params(vault, project)
    assert params.env is not None
    params.env["OSK_SEMANTIC"] = "0"  # no embedding thread to index the rounds between calls

    async def scenario() -> None:
        async with mcp.Client(params, mode="legacy") as client:
            said = await client.call_tool("append_raw", {
                "conversation": "c1", "user": "the NAS login moved to the tulip orbit host",
                "assistant": "Ok."})
            assert not said.is_error, said.content[0].text
            found = await client.call_tool("search", {"query": "tulip orbit host"})
            assert "c1#Round 1" in found.content[0].text  # indexed while the disk took it
            longer = " ".join(f"printerword{n}" for n in range(3000))
            said = await client.call_tool("append_raw", {
                "conversation": "c1", "user": f"the printer jams on tray two {longer}",
                "assistant": "Ok."})
            assert not said.is_error, said.content[0].text
            _fill(tmpfs)  # the round landed; the index has not taken it
            found = await client.call_tool("search", {"query": "tulip orbit host"})
            text = found.content[0].text
            assert not found.is_error and "internal error" not in text, text
            assert "c1#Round 1" in text, text  # not only nodes: the rounds it holds

    anyio.run(scenario)


def test_a_hand_edit_the_full_disk_keeps_from_the_recall_file_reaches_it_once_freed(
        tmpfs: Path, project: Path, caplog):
    from osk.hooks.recall import per_prompt
    from osk.search import recallfile

    vault = init(tmpfs / "vault")
    engine = Engine.open(vault, cwd=project)
    engine.warm()  # as the MCP server does: its index keeps the recall file from now on
    engine.create_node(HUB)
    made = engine.create_node(NewNode("Token rotation", "Tokens rotate monthly",
                                      "Rotate them.\n", space="Scope", cluster="auth",
                                      drafter="test-model"))
    path = vault.root / made.path
    words = " ".join(f"rotationword{n}" for n in range(3000))
    path.write_text(path.read_text("utf-8") + f"\n{words}\n", encoding="utf-8")  # by hand
    _fill(tmpfs)
    time.sleep(1.1)  # the look for hand edits runs at most once a second
    assert [hit.id for hit in engine.search("rotationword7", k=5).hits] == [made.id]
    assert "the recall file stays behind until the disk takes writes again" in caplog.text
    assert recallfile.path_in(vault.state("index")).exists()  # behind, and kept
    assert not per_prompt.ranked(vault, engine.scope, "rotationword7")
    (tmpfs / "filler").unlink()
    engine.create_node(NewNode("Key storage", "Keys live in the vault", "Stored.\n",
                               space="Scope", cluster="auth", drafter="test-model"))
    assert [hit.id for hit in per_prompt.ranked(vault, engine.scope, "rotationword7")] == [made.id]
    assert per_prompt.ranked(vault, engine.scope, "the auth hub")


def test_an_engine_that_opens_on_a_full_disk_leaves_the_recall_file_be(tmpfs: Path,
                                                                        project: Path):
    from osk.hooks.recall import per_prompt
    from osk.search import recallfile

    vault = init(tmpfs / "vault")
    first = Engine.open(vault, cwd=project)
    first.warm()  # as the MCP server does: its index keeps the recall file
    first.create_node(HUB)
    made = first.create_node(NewNode("Token rotation", "Tokens rotate monthly",
                                     "Rotate them.\n", space="Scope", cluster="auth",
                                     drafter="test-model"))
    del first
    gc.collect()  # its connections closed: the next must make the write-ahead log's files
    recall = recallfile.path_in(vault.state("index"))
    assert recall.exists() and not recall.with_name(f"{recall.name}-shm").exists()
    _fill(tmpfs)
    later = Engine.open(vault, cwd=project)
    assert made.id in [hit.id for hit in later.search("token rotation", k=5, kind="nodes").hits]
    assert later._search_index().load_report.startswith(
        "built in memory: the disk refused the recall file: the disk holding the vault is full")
    assert recall.exists()  # left as it was, not taken for damaged and removed
    (tmpfs / "filler").unlink()
    assert made.id in [hit.id for hit in per_prompt.ranked(vault, later.scope, "token rotation")]


def test_the_stop_hook_on_a_read_only_vault_says_so_in_one_line(tmpfs: Path, project: Path,
                                                                tmp_path: Path):
    vault = init(tmpfs / "vault")
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    data = json.loads(payload("claude", "stop", transcript=transcript, cwd=project))
    done = run_hook("stop", "claude", json.dumps(data).encode(), cwd=project,
                    env={"OSK_VAULT": str(vault.root)})
    assert done.returncode == 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "read-only file system (EROFS" in lines[0], done.stderr


def test_the_walk_of_all_device_state_runs_at_most_once_an_hour(vault: Vault, project: Path):
    Engine.open(vault, cwd=project)  # the first open walks and stamps
    dead = _dead_pid()
    deep = vault.state("raw", "shop", f".{dead}.conv.json.tmp")
    shallow = vault.temp_dir / f".{dead}.Tokens.md.abcd.tmp"
    for path in (deep, shallow):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    Engine.open(vault, cwd=project)
    assert not shallow.exists(), "the write path's temp folder is swept on every open"
    assert deep.exists(), "device state was walked again within the hour"
    stamp = vault.state("debris-swept")
    os.utime(stamp, (stamp.stat().st_atime - 7200, stamp.stat().st_mtime - 7200))
    Engine.open(vault, cwd=project)
    assert not deep.exists()


# -- create_node / update_node: the answer agrees with the disk, whichever write is refused ------
def _synced(vault: Vault) -> dict[str, bytes]:
    """Every file of the vault that sync carries (device state left out), by path."""
    return {str(p.relative_to(vault.root)): p.read_bytes() for p in sorted(vault.root.rglob("*"))
            if p.is_file() and ".osk" not in p.relative_to(vault.root).parts}


def _audited(vault: Vault, node_id: str, file_text: bytes) -> bool:
    from osk.authority import audit
    from osk.store.fsutil import sha256_bytes
    from osk.store.ledger import Ledger

    return any(r.subject == node_id and r.data.get("after") == sha256_bytes(file_text)
               for r in Ledger(vault, audit.AUDIT).read().records)


def _pairs_recorded(vault: Vault, node_id: str) -> bool:
    from osk.provenance.rechecks import Rechecks

    cites = Rechecks(vault).citations(node_id)
    return cites is not None and bool(cites.pairs)


LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux",
                                reason="the shim finds a write's file in /proc")


SWEEPS = 4  # sweeps over N at most, until the write a check needs was refused once (below)


class Refusing:
    """The real server under the failing-write shim (tests/writes/failshim.py), and one trial of a
    call with its Nth write refused: the answer checked against the disk."""

    def __init__(self, vault: Vault, project: Path, tmp_path: Path) -> None:
        self.vault, self.project = vault, project
        self.control = tmp_path / "refuse"
        self.fired = self.control.with_name("refuse.fired")
        self.seen: dict[str, set[tuple[bool, str]]] = {}  # (answered ok, top folder refused)
        self.refused: list[tuple[bool, str]] = []  # (answered ok, the file refused), in turn
        tests = str(Path(__file__).parent)
        self.params = StdioServerParameters(
            command=sys.executable,
            args=["-c", f"import sys; sys.path.insert(0, {tests!r}); import failshim; "
                        f"sys.exit(failshim.serve(*sys.argv[1:]))",
                  str(self.control), str(vault.root), "mcp", "--vault", str(vault.root)],
            env={k: v for k, v in os.environ.items() if k != "OSK_VAULT"}, cwd=str(project))

    async def call(self, client: mcp.Client, tool: str, args: dict[str, object]) -> dict:
        done = await client.call_tool(tool, args)
        assert not done.is_error, done.content[0].text
        return json.loads(done.content[0].text)

    async def refuse(self, client: mcp.Client, tool: str, n: int, args: dict[str, object],
                     ) -> tuple[Any, str] | None:
        """Call ``tool`` with its Nth write refused: its answer and the file refused (None: it
        made fewer writes), then open the vault as the next process would (it finishes what
        was owed)."""
        self.fired.unlink(missing_ok=True)
        self.control.write_text(str(n))
        done = await client.call_tool(tool, args)
        self.control.write_text("0")
        if not self.fired.exists():
            assert not done.is_error, done.content[0].text
            return None
        refused = os.path.relpath(os.path.realpath(self.fired.read_text()),
                                  os.path.realpath(self.vault.root))
        if done.is_error:  # named as the full disk it is, never as a bug
            text = done.content[0].text
            assert "the disk holding the vault is full (ENOSPC" in text, text
            assert "internal error" not in text
        Engine.open(self.vault, cwd=self.project)
        return done, refused

    async def trial(self, client: mcp.Client, kind: str, n: int, args: dict[str, object],
                    landed: Callable[[dict], None] = lambda _: None,
                    partly: Callable[[str], None] | None = None) -> bool:
        """False once the call makes fewer than ``n`` writes (every point was tried). A failed
        call must leave the synced vault as it was, unless ``partly`` accepts its message
        (a unit that landed before the refused one); a done one must have its node, audit
        record and pairs once the vault is opened again, and ``landed`` holds for it."""
        vault = self.vault
        before = _synced(vault)
        refusal = await self.refuse(client, f"{kind}_node", n, args)
        if refusal is None:
            return False
        done, refused = refusal
        text = done.content[0].text
        if done.is_error:
            if partly is not None and "was written;" in text:
                partly(text)
            else:
                assert _synced(vault) == before, f"refused at {refused}: a failed call landed"
        else:
            out = json.loads(text)
            node = vault.abs(out["path"])
            assert node.exists(), refused
            assert _audited(vault, out["id"], node.read_bytes()), f"{refused}: no audit"
            assert _pairs_recorded(vault, out["id"]), f"refused at {refused}: no pairs"
            if refused.startswith("_ledger") and not out.get("hub"):  # still owed, it says
                # (a hub's bookkeeping is finished before its node's unit begins)
                assert "the disk refused what follows it (ENOSPC" in (out["owed"] or ""), out
            landed(out)
        assert validate.run(vault) == [], refused
        self.seen.setdefault(kind, set()).add((not done.is_error, refused.split(os.sep)[0]))
        self.refused.append((not done.is_error, refused))
        return True

    def run(self, scenario: Callable[[mcp.Client], Awaitable[None]]) -> None:
        async def connected() -> None:
            async with mcp.Client(self.params, mode="legacy") as client:
                await scenario(client)

        anyio.run(connected)


def _scoped(title: str, cluster: str, body: str, **more: object) -> dict[str, object]:
    return {"title": title, "summary": title, "body": body, "space": "scope",
            "cluster": cluster, "drafter": "test-model", **more}


@LINUX_ONLY
def test_each_refused_write_of_a_node_write_gets_an_answer_that_agrees_with_the_disk(
        vault: Vault, project: Path, tmp_path: Path):
    """Through the real server: the Nth write of create_node / update_node fails with ENOSPC,
    for every N the call makes. A call answered as failed left the synced vault byte for byte
    as it was; one answered as done has its node on disk, and once the next osk process opens
    the vault its audit record and recheck pairs are there and validate finds nothing."""
    shim = Refusing(vault, project, tmp_path)

    async def scenario(client: mcp.Client) -> None:
        await shim.call(client, "create_node", _scoped("auth", "auth", "The auth hub.\n"))
        for n in range(1, 40):
            if not await shim.trial(client, "create", n, _scoped(
                    f"Tokens {n}", "auth", "Rotate them.\n", derived_from=["[[auth]]"])):
                break
        marker = "v0"
        await shim.call(client, "create_node", _scoped("Keys", "auth", f"Keys {marker}.\n",
                                                       derived_from=["[[auth]]"]))
        for n in range(1, 40):
            new = f"v{n}"
            if not await shim.trial(client, "update", n, {
                    "node": "Keys", "old_text": f"Keys {marker}.", "new_text": f"Keys {new}."}):
                break
            if f"Keys {new}." in vault.abs("Scope/shop/auth/Keys.md").read_text("utf-8"):
                marker = new

    shim.run(scenario)
    for kind in ("create", "update"):
        answered = {ok for ok, _ in shim.seen[kind]}
        assert answered == {True, False}, (kind, shim.seen[kind])  # both sides of the unit
        assert (True, "_ledger") in shim.seen[kind], (kind, shim.seen[kind])  # after the file


@LINUX_ONLY
def test_a_superseding_write_and_a_new_clusters_hub_agree_with_the_disk_too(
        vault: Vault, project: Path, tmp_path: Path):
    """The same through a create that supersedes a node (the old node's closing is part of the
    unit: once the new node landed, the old one is closed, now or at the next open) and a
    create into a new cluster (its hub is a unit of its own: a refusal after the hub landed
    says the hub was written and the node was not, and exactly that is on disk)."""
    from osk.store.node import parse

    shim = Refusing(vault, project, tmp_path)

    def closed(title: str) -> Callable[[dict], None]:
        def check(_: dict) -> None:
            rel = f"Scope/shop/auth/{title}.md"
            assert parse(rel, vault.abs(rel).read_text("utf-8")).meta.valid_to, title
        return check

    partial: list[int] = []

    def only_the_hub(n: int) -> Callable[[str], None]:
        def check(text: str) -> None:
            partial.append(n)
            assert f"The cluster's hub 'c{n}' was written; 'Leaf {n}' was not" in text, text
            assert vault.abs(f"Scope/shop/c{n}/c{n}.md").exists()
            assert not vault.abs(f"Scope/shop/c{n}/Leaf {n}.md").exists()
        return check

    def hub_audited(out: dict) -> None:
        hub = vault.abs(out["hub"])
        assert _audited(vault, parse(out["hub"], hub.read_text("utf-8")).meta.id,
                        hub.read_bytes()), out

    def old_closing_refused() -> bool:
        return any(ok and refused.startswith(os.path.join("Scope", "shop", "auth", "Old "))
                   for ok, refused in shim.refused)

    made = iter(range(1, 1000))  # each trial's own titles, however many sweeps run

    async def scenario(client: mcp.Client) -> None:
        await shim.call(client, "create_node", _scoped("auth", "auth", "The auth hub.\n"))
        # A call does not make the same writes from run to run (a version already stored is
        # not stored again; a log line or a cache save may fall due), so one sweep over N can
        # step past the write a check needs: a sweep runs again, SWEEPS times at most, until
        # a refusal fell on it. Every trial of every sweep checks the disk all the same.
        for _ in range(SWEEPS):
            for n in range(1, 40):
                m = next(made)
                await shim.call(client, "create_node", _scoped(f"Old {m}", "auth", "Old way.\n"))
                if not await shim.trial(client, "create", n, _scoped(
                        f"New {m}", "auth", "New way.\n", derived_from=["[[auth]]"],
                        supersedes=f"[[Old {m}]]"), landed=closed(f"Old {m}")):
                    break
            if old_closing_refused():
                break
        for _ in range(SWEEPS):
            for n in range(1, 60):
                m = next(made)
                if not await shim.trial(client, "create", n, _scoped(
                        f"Leaf {m}", f"c{m}", "A leaf.\n", derived_from=["[[auth]]"]),
                        landed=hub_audited, partly=only_the_hub(m)):
                    break
            if partial:
                break

    shim.run(scenario)
    assert {ok for ok, _ in shim.seen["create"]} == {True, False}, shim.seen
    # the old node's closing refused after the new node landed: answered done, closed on open
    assert old_closing_refused(), shim.refused
    assert partial, "no refusal fell after a new cluster's hub had landed"


def test_a_write_that_still_owes_its_bookkeeping_stops_no_reader_and_is_finished_later(
        vault: Vault, project: Path, monkeypatch):
    """The disk refuses the ledgers after a node landed: the call is answered done with what it
    owes; while the disk stays full a new process still opens the vault and searches; once it
    takes writes, opening the vault finishes the audit record and the pairs."""
    from osk.store import ledger

    eng = Engine.open(vault, cwd=project)
    eng.create_node(HUB)
    monkeypatch.setattr(ledger, "append_durably", _full_disk)
    made = eng.create_node(NewNode("Tokens", "Rotate tokens", "Rotate them.\n", space="Scope",
                                   cluster="auth", drafter="test-model",
                                   derived_from=["[[auth]]"]))
    assert made.owed and "the disk refused what follows it (ENOSPC" in made.owed
    later = Engine.open(vault, cwd=project)  # the disk is still full
    assert [hit.title for hit in later.search("rotate tokens").hits][:1] == ["Tokens"]
    assert not _audited(vault, made.id, vault.abs(made.path).read_bytes())
    monkeypatch.undo()
    Engine.open(vault, cwd=project)
    assert _audited(vault, made.id, vault.abs(made.path).read_bytes())
    assert _pairs_recorded(vault, made.id) and validate.run(vault) == []


# -- move_nodes / move_cluster: the same rule for a move -------------------------------------
def _move_audited(vault: Vault, node_id: str, target: str) -> bool:
    from osk.authority import audit

    return any(e.action == "move" and e.path_after == target
               for e in audit.history(vault, node_id))


async def _move_trial(shim: Refusing, client: mcp.Client, tool: str, n: int,
                      args: dict[str, object]) -> bool:
    """One move with its Nth write refused; False once the call makes fewer than ``n``."""
    vault = shim.vault
    before = _synced(vault)
    refusal = await shim.refuse(client, tool, n, args)
    if refusal is None:
        return False
    done, refused = refusal
    if done.is_error:
        assert _synced(vault) == before, f"{tool} refused at {refused}: a failed move landed"
    else:
        out = json.loads(done.content[0].text)
        for moved in out["moved"]:
            assert vault.abs(moved["after"]).exists() and not vault.abs(moved["before"]).exists()
            assert _move_audited(vault, moved["id"], moved["after"]), f"{refused}: no audit"
        if refused.startswith("_ledger"):
            assert "the disk refused what follows it (ENOSPC" in (out["owed"] or ""), out
    assert validate.run(vault) == [], refused
    shim.seen.setdefault(tool, set()).add((not done.is_error, refused.split(os.sep)[0]))
    return True


@LINUX_ONLY
def test_each_refused_write_of_a_move_gets_an_answer_that_agrees_with_the_disk(
        vault: Vault, project: Path, tmp_path: Path):
    """Through the real server: the Nth write of move_nodes / move_cluster fails with ENOSPC,
    for every N the call makes. A move answered as failed left the synced vault as it was; one
    answered as done has its files moved, and once the next osk process opens the vault its
    audit records are there and validate finds nothing."""
    shim = Refusing(vault, project, tmp_path)

    made = iter(range(1, 1000))

    async def leaf() -> dict[str, object]:
        name = f"Leaf {next(made)}"
        await shim.call(client_of[0], "create_node", _scoped(name, "auth", "A leaf.\n"))
        return {"nodes": [name], "space": "scope", "cluster": "other"}

    async def cluster() -> dict[str, object]:
        name = f"m{next(made)}"
        await shim.call(client_of[0], "create_node", _scoped(name, name, "A hub.\n"))
        return {"cluster": name, "space": "scope", "to_space": "domain"}

    client_of: list[mcp.Client] = []

    async def scenario(client: mcp.Client) -> None:
        client_of.append(client)
        for hub in ("auth", "other"):
            await shim.call(client, "create_node", _scoped(hub, hub, f"The {hub} hub.\n"))
        for tool, args in (("move_nodes", leaf), ("move_cluster", cluster)):
            for n in range(1, 30):
                if not await _move_trial(shim, client, tool, n, await args()):
                    break
            # a call's writes vary from run to run (see the superseding test): the first two
            # after the journal are tried again until one was the audit
            for n in (2, 3, 2, 3, 2, 3):
                if (True, "_ledger") in shim.seen[tool]:
                    break
                await _move_trial(shim, client, tool, n, await args())

    shim.run(scenario)
    for tool in ("move_nodes", "move_cluster"):
        assert (True, "_ledger") in shim.seen[tool], (tool, shim.seen[tool])  # after the move
