"""Per-prompt recall asked of the session's MCP server over its socket (osk.hooks.recall.channel,
osk.search.recall_server).

A real ``osk mcp`` process listens (the semantic channel on, with the tiny test model); the
prompt-submit hook runs as hosts run it. Whether an answer came over the socket is told by
removing the recall file: the hook's other path then has nothing to rank.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hookkit import payload
from recallkit import FACT, prompt, write
from semantic_support import write_tiny_model
from writekit import write_toml

from osk.calls.request import NewNode
from osk.engine.core import Engine
from osk.hooks.recall import channel, per_prompt
from osk.search import SearchIndex, recall_hits, recall_server, recall_wire, recallfile
from osk.store.vault import Vault, init

OTHER = ("Alpha launch codes are kept offline",
         "The alpha project's launch codes are kept offline in the safe.",
         "Offline, in the safe.\n")


@pytest.fixture
def tiny_model(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    folder = write_tiny_model(tmp_path_factory.mktemp("model"))
    monkeypatch.setenv("OSK_MODEL_DIR", str(folder))
    monkeypatch.setenv("OSK_SEMANTIC", "1")
    return folder


@pytest.fixture(autouse=True)
def patient_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded test machine may take longer than the 300 ms a hook gives a server: these
    tests wait as long as it takes (a test of the timeout sets its own)."""
    monkeypatch.setenv(channel.TIMEOUT_ENV, "60")


def set_server(vault: Vault, value: str) -> None:
    toml = vault.root / "osk.toml"
    text = toml.read_text(encoding="utf-8")
    assert "\nserver = true\n" in text  # as osk init writes it: on
    write_toml(vault, text.replace("\nserver = true\n", f"\nserver = {value}\n"))


@pytest.fixture
def eng(vault: Vault, project: Path, tiny_model: Path) -> Engine:
    set_server(vault, "true")
    engine = Engine.open(vault, cwd=project)
    engine.warm()
    return engine


@pytest.fixture
def project(tmp_path: Path) -> Path:
    from writekit import make_repo

    return make_repo(tmp_path / "work" / "shop")


def sockets(vault: Vault) -> list[Path]:
    folder = recall_wire.socket_dir(vault)
    return sorted(folder.glob("*.sock")) if folder.exists() else []


@contextmanager
def server(vault: Vault, project: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``osk mcp`` for this vault, once its recall socket is there (polled, not timed)."""
    before = set(sockets(vault))
    process = subprocess.Popen([sys.executable, "-m", "osk", "mcp", "--vault", str(vault.root)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, cwd=project, env={**os.environ})
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not set(sockets(vault)) - before:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr \
                else "the server exited"
            time.sleep(0.05)
        assert set(sockets(vault)) - before, "the server never listened"
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the host goes: the server stops
        process.wait(timeout=60)
        if process.stderr:
            process.stderr.close()


def drop_recall_file(vault: Vault) -> None:
    recallfile.remove(vault.state("index"))
    assert not recallfile.path_in(vault.state("index")).exists()


# -- the socket path ---------------------------------------------------------------------------
def test_the_hook_injects_what_the_servers_socket_ranks_and_the_socket_goes_with_it(
        eng, vault, project, tmp_path):
    node_id = write(eng, *FACT)
    with server(vault, project):
        drop_recall_file(vault)  # the recall file cannot answer now: only the socket can
        block = prompt("claude", project, FACT[0], "p-1", tmp_path)
        assert f"id {node_id}" in block and FACT[1] in block
    assert sockets(vault) == []  # a server that stops removes its socket
    # the control: no server, no recall file, nothing to rank (another conversation)
    assert prompt("codex", project, FACT[0], "p-1", tmp_path) == ""


def test_a_node_another_process_writes_while_the_server_runs_is_recalled_through_it(
        eng, vault, project, tmp_path):
    write(eng, *FACT)
    with server(vault, project):
        assert channel.ask(vault, eng.scope, FACT[0]) is not None  # it has walked once
        later = write(eng, "Cart totals round half to even",
                      "Cart totals are rounded half to even, to the cent.", "Banker's rounding.\n",
                      cluster="cart")  # this test process is the other process
        drop_recall_file(vault)
        block = prompt("claude", project, "Cart totals round half to even", "p-1", tmp_path)
        assert f"id {later}" in block


def test_another_scopes_node_never_comes_through_the_socket(eng, vault, project, tmp_path):
    own = write(eng, *FACT)
    alpha = Engine.open(vault, cwd=project, scope="alpha")
    hidden = write(alpha, *OTHER, cluster="launch")
    with server(vault, project):
        drop_recall_file(vault)
        assert f"id {hidden}" not in prompt("claude", project, OTHER[0], "p-1", tmp_path)
        assert f"id {own}" in prompt("claude", project, FACT[0], "p-2", tmp_path)  # control
        # the server's own answer, before the hook's filters: no hidden node in it
        shop = channel.ask(vault, eng.scope, OTHER[0])
        assert shop is not None and hidden not in [hit.id for hit in shop.hits]
        seen_from_alpha = channel.ask(vault, "alpha", OTHER[0])
        assert seen_from_alpha is not None
        assert [hit.id for hit in seen_from_alpha.hits][:1] == [hidden]  # control


def test_a_killed_servers_socket_is_skipped_and_removed_and_the_recall_file_answers(
        eng, vault, project, tmp_path):
    node_id = write(eng, *FACT)
    with server(vault, project) as process:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        assert len(sockets(vault)) == 1  # left behind: nobody removed it
        block = prompt("claude", project, FACT[0], "p-1", tmp_path)
    assert f"id {node_id}" in block  # from the recall file
    assert sockets(vault) == []  # the refused connection removed it


def test_a_hook_that_asks_while_the_server_starts_leaves_its_socket_alone(
        eng, vault, monkeypatch: pytest.MonkeyPatch):
    """The moment between the socket's bind and its listen: a hook asking then is refused. It
    must not have found the socket file then (it removes a refused one as a dead server's)."""
    write(eng, *FACT)
    asked_meanwhile = []
    listen = socket.socket.listen

    def hook_asks_first(sock: socket.socket, backlog: int) -> None:
        asked_meanwhile.append(channel.ask(vault, eng.scope, FACT[0]))
        listen(sock, backlog)

    monkeypatch.setattr(socket.socket, "listen", hook_asks_first)
    listener = eng.listen_for_recall()
    monkeypatch.undo()
    assert listener is not None
    try:
        assert asked_meanwhile == [None]  # nothing to ask yet: the recall file answers it
        assert sockets(vault) == [listener.path]
        assert channel.ask(vault, eng.scope, FACT[0]) is not None
    finally:
        listener.close()
    assert sockets(vault) == [] and not list(listener.path.parent.glob("*.bind"))


@contextmanager
def mute_socket(vault: Vault, answer: bytes | None = None) -> Iterator[socket.socket]:
    """A socket in the servers' folder that never accepts (``answer`` None: the kernel queues
    the connection and nobody reads it), or that answers ``answer`` to whoever connects."""
    folder = recall_wire.socket_dir(vault)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "999999.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def reply() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(answer or b"")

    if answer is not None:
        threading.Thread(target=reply, daemon=True).start()
    try:
        yield listener
    finally:
        listener.close()
        path.unlink(missing_ok=True)


def test_a_server_that_never_answers_costs_a_bounded_wait_then_the_recall_file_answers(
        eng, vault, project, tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(channel.TIMEOUT_ENV)  # the hook's own bound
    node_id = write(eng, *FACT)
    with mute_socket(vault) as listener:
        block = prompt("claude", project, FACT[0], "p-1", tmp_path)  # run_hook bounds it
        assert f"id {node_id}" in block
        listener.setblocking(False)
        listener.accept()[0].close()  # the hook did connect: it waited, then gave up
        assert channel.ask(vault, eng.scope, FACT[0]) is None


def test_the_wait_is_the_hooks_own_unless_set_to_a_positive_number(
        monkeypatch: pytest.MonkeyPatch):
    default = channel.ANSWER_TIMEOUT
    for value, wanted in (("2.5", 2.5), ("0", default), ("-1", default), ("inf", default),
                          ("soon", default)):
        monkeypatch.setenv(channel.TIMEOUT_ENV, value)
        assert channel.answer_timeout() == wanted
    monkeypatch.delenv(channel.TIMEOUT_ENV)
    assert channel.answer_timeout() == channel.ANSWER_TIMEOUT


@pytest.mark.parametrize("answer", [
    b"not json\n", b'{"hits": [{"id": 1}], "agree": 1}\n', b"[]\n",
    b'{"hits": "x", "agree": true}\n',
    b'{"hits": [], "agree": true, "words": [], "closeness": "near"}\n',
    b'{"hits": [], "agree": true, "words": [], "closeness": true}\n'])
def test_an_answer_that_does_not_parse_is_no_answer(eng, vault, project, tmp_path, answer):
    node_id = write(eng, *FACT)
    with mute_socket(vault, answer):
        assert channel.ask(vault, eng.scope, FACT[0]) is None
        assert f"id {node_id}" in prompt("claude", project, FACT[0], "p-1", tmp_path)


def test_with_the_setting_off_no_server_listens_and_no_hook_asks(eng, vault, project, tmp_path):
    node_id = write(eng, *FACT)
    toml = vault.root / "osk.toml"
    write_toml(vault, toml.read_text(encoding="utf-8").replace("\nserver = true\n",
                                                               "\nserver = false\n"))
    assert recall_server.listen(SearchIndex(vault), vault) is None
    with mute_socket(vault) as listener:
        assert f"id {node_id}" in prompt("claude", project, FACT[0], "p-1", tmp_path)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    write_toml(vault, toml.read_text(encoding="utf-8").replace("server = false",
                                                               'server = "yes"'))
    with pytest.raises(Exception, match=r"\[recall\] server must be true or false"):
        recall_wire.server_enabled(vault)


def test_closing_the_listener_ends_its_thread(vault, tiny_model):
    """A thread blocked in ``accept`` is not woken by closing the socket: on Linux it waits
    for good (the suite's process kept one such thread for each listener a test closed)."""
    before = {thread for thread in threading.enumerate() if thread.name == "osk-recall"}
    listener = recall_server.listen(SearchIndex(vault), vault)
    assert listener is not None
    (serving,) = {thread for thread in threading.enumerate()
                  if thread.name == "osk-recall"} - before
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as asker:
        asker.connect(str(listener.path))  # answered once the thread has reached accept
        asker.shutdown(socket.SHUT_WR)
        asker.settimeout(5.0)
        assert asker.recv(1) == b""  # an empty request: it hangs up and accepts again
    time.sleep(0.1)
    listener.close()
    serving.join(10.0)
    assert not serving.is_alive()
    assert sockets(vault) == []


def test_the_channel_is_on_in_a_new_vault_and_when_the_setting_is_absent(vault, tiny_model):
    assert recall_wire.server_enabled(vault)  # osk init writes server = true
    listener = recall_server.listen(SearchIndex(vault), vault)
    assert listener is not None
    listener.close()
    toml = vault.root / "osk.toml"
    write_toml(vault, toml.read_text(encoding="utf-8").replace("\nserver = true\n", "\n"))
    assert recall_wire.server_enabled(vault)
    write_toml(vault, toml.read_text(encoding="utf-8").replace("[recall]\n",
                                                               "[recall]\nserver = false\n"))
    assert not recall_wire.server_enabled(vault)


def test_without_the_semantic_model_the_server_does_not_listen(
        vault, monkeypatch: pytest.MonkeyPatch):
    set_server(vault, "true")
    monkeypatch.setenv("OSK_SEMANTIC", "0")
    assert recall_server.listen(SearchIndex(vault), vault) is None


def test_a_vault_whose_socket_path_is_too_long_listens_in_a_private_temp_folder(
        tmp_path: Path, tiny_model: Path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    vault = init(deep / "vault")
    set_server(vault, "true")
    folder = recall_wire.socket_dir(vault)
    assert folder.parent == Path("/tmp") / f"osk-{os.getuid()}"
    eng = Engine.open(vault, cwd=deep, scope=None)
    eng.create_node(NewNode("notes", "Hub.", "Hub.\n", space="domain", cluster="notes",
                            drafter="test-model"))
    listener = eng.listen_for_recall()
    assert listener is not None
    try:
        assert (os.stat(folder).st_mode & 0o777) == 0o700
        found = channel.ask(vault, "", "notes")
        assert found is not None and [hit.title for hit in found.hits][:1] == ["notes"]
    finally:
        listener.close()
    assert not listener.path.exists()


def test_the_hook_asks_the_server_on_the_standard_library_alone(eng, vault, project, tmp_path):
    write(eng, *FACT)
    listener = eng.listen_for_recall()  # this test process is the server
    assert listener is not None
    drop_recall_file(vault)
    data = payload("claude", "prompt_submit", transcript=tmp_path / "t.jsonl", cwd=project,
                   prompt_id="p-1", prompt=FACT[0])
    script = "\n".join([
        "import io, sys",
        "from osk.hooks.main import run",
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({data!r}))",
        "assert run(['prompt-submit', '--host', 'claude']) == 0",
        "print(' '.join(sys.modules), file=sys.stderr)",
    ])
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              cwd=project, env={**os.environ, "OSK_GROWTH": "off"}, timeout=60)
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    assert FACT[0] in done.stdout
    loaded = set(done.stderr.split())
    assert "osk.hooks.recall.channel" in loaded
    assert not loaded & {"pydantic", "yaml", "mcp", "git", "rank_bm25", "numpy",
                         "osk.search.index", "osk.search.semantic"}


def test_the_answer_carries_what_the_hook_checks_and_round_trips(eng, vault):
    node_id = write(eng, *FACT)
    index = SearchIndex(vault)
    found = recall_server.answer(index, vault, eng.scope, FACT[0])
    assert [hit.id for hit in found.hits][:1] == [node_id]
    top = found.hits[0]
    assert top.confidence == recall_hits.TITLE_CONFIDENCE and len(top.stat) == 3
    # one hit is meaning's first (the tiny test model's choice), with its closeness
    assert sum(hit.meant for hit in found.hits) == 1
    assert 0 < found.closeness <= 1.0
    message = {"hits": [recall_wire.plain(h) for h in found.hits], "agree": found.agree,
               "words": [recall_wire.plain(h) for h in found.words],
               "closeness": found.closeness}
    assert recall_wire.decode(json.dumps(message).encode() + b"\n") == found
    # an older server sends no closeness: nothing is close, the rest stands
    del message["closeness"]
    older = recall_wire.decode(json.dumps(message).encode() + b"\n")
    assert older is not None and older.closeness == 0.0 and older.hits == found.hits


def test_when_the_fused_order_shows_nothing_its_lexical_order_still_may(eng, vault):
    from dataclasses import replace

    write(eng, *FACT)
    found = recall_server.answer(SearchIndex(vault), vault, eng.scope, FACT[0])
    top = found.hits[0]
    unsure = replace(found, hits=[replace(top, confidence=per_prompt.FUSED_FLOOR / 2)],
                     agree=False, closeness=0.0)
    sure_words = replace(unsure, words=[replace(top, confidence=per_prompt.RESCUE_FLOOR)])
    assert per_prompt.choose(vault, sure_words) == per_prompt.select(vault, sure_words.words,
                                                             floor=per_prompt.RESCUE_FLOOR)
    assert [hit.id for hit in per_prompt.choose(vault, sure_words)] == [top.id]
    weak_words = replace(unsure, words=[replace(top, confidence=per_prompt.RESCUE_FLOOR - 0.1)])
    assert per_prompt.choose(vault, weak_words) == []
    # both channels agreeing on the first node lowers the fused floor
    agreed = replace(weak_words, hits=[replace(top, confidence=per_prompt.AGREE_FLOOR)], agree=True)
    assert [hit.id for hit in per_prompt.choose(vault, agreed)] == [top.id]


def test_a_first_node_close_in_meaning_lowers_the_fused_floor_as_agreement_does(eng, vault):
    from dataclasses import replace

    write(eng, *FACT)
    found = recall_server.answer(SearchIndex(vault), vault, eng.scope, FACT[0])
    top = replace(found.hits[0], confidence=per_prompt.AGREE_FLOOR)
    apart = replace(found, hits=[top], words=[], agree=False,
                    closeness=per_prompt.MEANING_FLOOR - 0.01)
    assert per_prompt.choose(vault, apart) == []
    close = replace(apart, closeness=per_prompt.MEANING_FLOOR)
    assert [hit.id for hit in per_prompt.choose(vault, close)] == [top.id]
    # the lower floor is still a floor
    faint = replace(close, hits=[replace(top, confidence=per_prompt.AGREE_FLOOR - 0.01)])
    assert per_prompt.choose(vault, faint) == []


def test_the_node_meaning_ranks_first_is_not_cut_for_holding_fewer_of_the_words(eng, vault):
    from dataclasses import replace

    first = write(eng, *FACT)
    second = write(eng, *OTHER)
    index = SearchIndex(vault)
    hits = {hit.id: replace(hit, meant=False) for title in (FACT[0], OTHER[0])
            for hit in recall_server.answer(index, vault, eng.scope, title).hits}
    sure = replace(hits[first], confidence=10.0)
    faint = replace(hits[second], confidence=10.0 * per_prompt.RELATIVE - 0.5)
    assert [hit.id for hit in per_prompt.select(vault, [sure, faint])] == [first]
    meant = replace(faint, meant=True)
    assert [hit.id for hit in per_prompt.select(vault, [sure, meant])] == [first, second]


@pytest.mark.parametrize(("lexical", "semantic", "backed"), [
    ([7, 3], [7, 1], True),    # first in both
    ([3, 7], [7, 1], True),    # second by words, first by meaning
    ([7, 3], [1, 7], True),    # first by words, second by meaning
    ([3, 4, 7], [7], True),    # third by words
    ([7], [1, 2, 7], True),    # third by meaning
    ([3, 4, 5, 7], [7], False),  # fourth by words: not backed
    ([7], [1, 2, 3, 7], False),  # fourth by meaning: not backed
    ([7], [], False),          # meaning has nothing
])
def test_both_channels_back_the_fused_first_only_from_their_own_first_three(
        lexical: list[int], semantic: list[int], backed: bool):
    assert recall_server.AGREE_DEPTH == 3
    words = [(slot, 0, 1.0, 1.0) for slot in lexical]
    meaning = [(slot, 0.5) for slot in semantic]
    assert recall_server.backed(7, words, meaning) is backed


def test_the_gates_floors_are_read_from_one_place_at_each_call(eng, vault, monkeypatch):
    """Every path of the gate reads its floor from ``osk.hooks.recall``'s constants when it
    runs (bench/recall_gate.py and bench/locomo.py sweep them there): raising one there
    silences its path, and nothing keeps a copy taken at import."""
    from dataclasses import replace

    write(eng, *FACT)
    found = recall_server.answer(SearchIndex(vault), vault, eng.scope, FACT[0])
    top = replace(found.hits[0], confidence=per_prompt.FUSED_FLOOR)
    fused = replace(found, hits=[top], words=[], agree=False, closeness=0.0)
    assert per_prompt.choose(vault, fused) and per_prompt.select(vault, [top])
    monkeypatch.setattr(per_prompt, "FUSED_FLOOR", top.confidence + 0.01)
    assert per_prompt.choose(vault, fused) == []
    monkeypatch.setattr(per_prompt, "FLOOR", top.confidence + 0.01)
    assert per_prompt.select(vault, [top]) == []
    close = replace(fused, hits=[replace(top, confidence=per_prompt.AGREE_FLOOR)],
                    closeness=per_prompt.MEANING_FLOOR)
    assert per_prompt.choose(vault, close)
    monkeypatch.setattr(per_prompt, "MEANING_FLOOR", close.closeness + 0.01)
    assert per_prompt.choose(vault, close) == []
