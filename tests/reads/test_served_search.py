"""A fresh `osk search` with the semantic channel on asks a running `osk mcp` of its vault for
the search tool's answer over the recall socket (``osk.reads.quick_search.served``,
``osk.search.recall_server``); with no server to answer it ranks by words alone, loading
neither NumPy nor the model, and says so. Real processes: the server is a real `osk mcp` driven
by the official MCP client, each search a fresh `osk search` process that reports the modules
it imported.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import mcp
import pytest
from recallkit import write
from semantic_support import write_tiny_model
from serverkit import ok, params
from test_quick_search import NOT_IMPORTED

from osk.engine.core import Engine
from osk.hooks.recall import channel
from osk.reads.quick_search import WORDS_ALONE
from osk.search import recall_wire
from osk.store.vault import Vault, init

# The tiny test model's own words: it reads them, and no node below holds either, so words
# alone find nothing and meaning ranks every node.
PARAPHRASE = "deploy cafe"
NODES = (("Speed hack detection", "the game clock speed hack", "The game clock is fast.\n"),
         ("Release build", "the release build", "Build the release.\n"),
         ("Cache ttl", "the cache ttl is 60 seconds", "Sixty seconds.\n"))
HIDDEN = ("Alpha launch build", "the alpha release build", "Kept offline.\n")

CHILD = (
    "import sys\n"
    "from osk.surfaces.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.fixture
def tiny_model(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OSK_MODEL_DIR", str(write_tiny_model(tmp_path_factory.mktemp("model"))))
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    # A loaded test machine may take longer than a search's own wait (a test of the wait
    # sets its own).
    monkeypatch.setenv(channel.TIMEOUT_ENV, "60")


@pytest.fixture
def filled(vault: Vault, project: Path, tiny_model: None) -> Engine:
    """The vault with three nodes of this project's scope, one of scope alpha, every node with
    its vector (so the server's answer does not move while it embeds)."""
    eng = Engine.open(vault, cwd=project)
    for node in NODES:
        write(eng, *node, cluster="notes")
    write(Engine.open(vault, cwd=project, scope="alpha"), *HIDDEN, cluster="launch")
    # Embedded by an engine opened after every write: ``eng``'s index looks at the files at
    # most once a second, so it could miss the alpha node and the hubs, and the server then
    # embedded them within a search's budget, or not, as the machine's load allowed.
    assert Engine.open(vault, cwd=project).embed_nodes() == 0
    missing: list[int] = []
    Engine.open(vault, cwd=project).embed_nodes(progress=lambda done, total: missing.append(total))
    assert missing == []  # no node is left without its vector
    return eng


def fresh_search(vault: Vault, cwd: Path, *options: str,
                 env: dict[str, str] | None = None) -> tuple[dict[str, Any], str, set[str]]:
    """One fresh `osk search --json`: (its JSON, its stderr before the module list, the
    modules it imported)."""
    done = subprocess.run([sys.executable, "-c", CHILD, "--vault", str(vault.root), "search",
                           *options, "--json"], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", env={**os.environ, **(env or {})}, timeout=300)
    assert done.returncode == 0, done.stderr
    *said, modules = done.stderr.strip().splitlines()
    return json.loads(done.stdout), "\n".join(said), set(modules.split())


def plain_search(vault: Vault, cwd: Path, query: str) -> subprocess.CompletedProcess[str]:
    """One fresh `osk search QUERY` as a person runs it (text, not JSON)."""
    return subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "search",
                           query], cwd=cwd, capture_output=True, text=True, encoding="utf-8",
                          timeout=300, check=True)


def sockets(vault: Vault) -> list[Path]:
    folder = recall_wire.socket_dir(vault)
    return sorted(folder.glob("*.sock")) if folder.exists() else []


def wait_for_socket(vault: Vault, before: list[Path]) -> None:
    deadline = time.monotonic() + 120  # polled, not timed
    while time.monotonic() < deadline and not set(sockets(vault)) - set(before):
        time.sleep(0.05)
    assert set(sockets(vault)) - set(before), "the server never listened"


@asynccontextmanager
async def served(vault: Vault, project: Path) -> AsyncIterator[mcp.Client]:
    """A real `osk mcp` for ``vault`` (the MCP client's), once its recall socket listens."""
    before = sockets(vault)
    async with mcp.Client(params(vault, project)) as client:
        await client.list_tools()
        wait_for_socket(vault, before)
        yield client


@contextmanager
def killed_server(vault: Vault, project: Path) -> Iterator[None]:
    """A server that listened, then died without removing its socket."""
    before = sockets(vault)
    process = subprocess.Popen([sys.executable, "-m", "osk", "mcp", "--vault", str(vault.root)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=project)
    try:
        wait_for_socket(vault, before)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        assert process.stdin is not None
        process.stdin.close()
    yield


TOOL_FIELDS = ("title", "path", "id", "summary", "updated", "score", "markers")


def as_tool(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{name: hit[name] for name in TOOL_FIELDS} for hit in hits]


@pytest.mark.anyio
async def test_with_a_server_running_the_cli_gives_the_search_tools_hits_without_numpy(
        vault, project, filled):
    words, _, _ = fresh_search(vault, project, PARAPHRASE, env={"OSK_SEMANTIC": "0"})
    assert words["hits"] == []  # words alone miss it
    async with served(vault, project) as client:
        for options, tool in [((), {}), (("--kind", "nodes", "--k", "2"),
                                         {"kind": "nodes", "k": 2})]:
            found, said, modules = fresh_search(vault, project, PARAPHRASE, *options)
            expected = await ok(client, "search", {"query": PARAPHRASE, **tool})
            assert expected["hits"]  # meaning finds what words miss
            assert as_tool(found["hits"]) == expected["hits"]
            assert found["scope"] == expected["scope"] == filled.scope
            # no model, no engine: what a search from the store leaves off, and SQLite too
            assert modules.isdisjoint({*NOT_IMPORTED, "sqlite3"}), modules & {*NOT_IMPORTED}
            assert said == ""
        done = plain_search(vault, project, PARAPHRASE)
        assert WORDS_ALONE not in done.stderr and "Speed hack detection" in done.stdout


@pytest.mark.anyio
async def test_scope_isolation_holds_through_the_server(vault, project, filled):
    async with served(vault, project):
        own, _, _ = fresh_search(vault, project, "alpha release build")
        assert HIDDEN[0] not in [hit["title"] for hit in own["hits"]]
        assert [hit["title"] for hit in own["hits"]][:1] == ["Release build"]
        alpha, _, modules = fresh_search(vault, project, "alpha release build",
                                         "--scope", "alpha")
        assert [hit["title"] for hit in alpha["hits"]][:1] == [HIDDEN[0]]  # control
        assert alpha["scope"] == "alpha" and "numpy" not in modules
    # the engine in this process (which loads the model) answers that session alike
    engine = Engine.open(vault, cwd=project, scope="alpha").search("alpha release build")
    assert [hit["id"] for hit in alpha["hits"]] == [hit.id for hit in engine.hits], (
        [(hit["title"], hit["score"]) for hit in alpha["hits"]],
        [(hit.title, hit.score) for hit in engine.hits])


def test_with_no_server_the_cli_ranks_by_words_alone_without_numpy_and_says_so(
        vault, project, filled):
    assert sockets(vault) == []
    for query in (PARAPHRASE, "release build"):
        found, said, modules = fresh_search(vault, project, query)
        words, _, _ = fresh_search(vault, project, query, env={"OSK_SEMANTIC": "0"})
        assert found["hits"] == words["hits"]
        assert "numpy" not in modules
    assert [hit["title"] for hit in found["hits"]][:1] == ["Release build"]  # control
    done = plain_search(vault, project, PARAPHRASE)
    assert done.stderr.splitlines() == [
        f"Nothing matches {PARAPHRASE!r} (scope {filled.scope}).", WORDS_ALONE]
    # --semantic loads the model here instead, and finds what words miss
    meant, _, modules = fresh_search(vault, project, PARAPHRASE, "--semantic")
    assert meant["hits"] and "numpy" in modules
    # with the channel switched off, words were asked for: no line about it
    done = subprocess.run([sys.executable, "-m", "osk", "--vault", str(vault.root), "search",
                           "release build"], cwd=project, capture_output=True, text=True,
                          encoding="utf-8", env={**os.environ, "OSK_SEMANTIC": "0"}, check=True)
    assert "Release build" in done.stdout and WORDS_ALONE not in done.stderr


@pytest.mark.anyio
async def test_a_server_of_another_vault_is_never_asked(vault, project, filled, tmp_path):
    other = init(tmp_path / "other-vault")
    eng = Engine.open(other, cwd=project)
    write(eng, *NODES[0], cluster="notes")
    assert eng.embed_nodes() == 0
    async with served(other, project):
        found, said, modules = fresh_search(vault, project, PARAPHRASE)
        assert found["hits"] == [] and "numpy" not in modules  # words alone, here
        # and a request naming this vault, put to the other vault's socket, is not answered
        ask = recall_wire.SearchAsk(str(vault.root), str(project), None, PARAPHRASE, None,
                                    "all", None)
        assert channel.ask_search(other, ask) is None
        control = channel.ask_search(other, recall_wire.SearchAsk(
            str(other.root), str(project), None, PARAPHRASE, None, "all", None))
        assert control is not None and NODES[0][0] in [hit.title for hit in control.hits]


def test_a_dead_servers_socket_is_skipped_removed_and_words_answer(vault, project, filled,
                                                                   monkeypatch):
    monkeypatch.delenv(channel.TIMEOUT_ENV)  # the search's own wait
    with killed_server(vault, project):
        assert len(sockets(vault)) == 1  # left behind: nobody removed it
        found, said, modules = fresh_search(vault, project, "release build")
    assert [hit["title"] for hit in found["hits"]][:1] == ["Release build"]
    assert "numpy" not in modules
    assert sockets(vault) == []  # the refused connection removed it at once


def test_a_server_that_never_answers_costs_a_bounded_wait_then_words_answer(
        vault, project, filled, monkeypatch):
    monkeypatch.setenv(channel.TIMEOUT_ENV, "0.2")
    folder = recall_wire.socket_dir(vault)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "999999.sock"
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(path))
    mute.listen(8)  # the kernel queues the connection; nobody ever reads it
    try:
        found, _, modules = fresh_search(vault, project, "release build")
        assert path.exists()  # alive, only slow: kept for the next asker
    finally:
        mute.close()
        path.unlink(missing_ok=True)
    assert [hit["title"] for hit in found["hits"]][:1] == ["Release build"]
    assert "socket" in modules and "numpy" not in modules  # it asked, then words answered


def test_an_asker_that_stopped_waiting_leaves_no_error_in_the_servers_log(
        vault, tiny_model, monkeypatch, caplog):
    """The server's search outlived the asker's wait (a first search that embeds, say): its
    answer has nobody to go to, which is no failure of the channel."""
    import threading

    from osk.search import SearchIndex, recall_server
    from osk.search.ranking import SearchResult

    released = threading.Event()

    def slow(asked: recall_wire.SearchAsk) -> SearchResult:
        released.wait(60)
        return SearchResult("s", asked.query, ())

    listener = recall_server.listen(SearchIndex(vault), vault, slow)
    assert listener is not None
    ask = recall_wire.SearchAsk(str(vault.root), str(vault.root), None, "cache", None, "all",
                                None)
    try:
        with caplog.at_level(logging.ERROR, logger="osk.recall"):
            monkeypatch.setenv(channel.TIMEOUT_ENV, "0.2")
            assert channel.ask_search(vault, ask) is None  # gave up waiting
            released.set()
            monkeypatch.setenv(channel.TIMEOUT_ENV, "60")
            # one connection at a time: this answer comes once the first one is done with
            answered = channel.ask_search(vault, ask)
    finally:
        listener.close()
    assert answered is not None and answered.query == "cache"  # control: it answers
    assert "a recall request failed" not in caplog.text
