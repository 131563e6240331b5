"""No secret in any field (issue 25 item 4): every name and identifier that enters the vault or
the device state passes the secret filter or is refused by name, through the real MCP server;
`read_raw` of a project file returns it filtered and refuses Git's own folder.

Free text is redacted (tests/capture/test_node_secrets.py, tests/capture/test_secrets.py); a name
or identifier (a conversation or completion id, a host, a drafter, a cluster or scope folder, a
cited path, a path `osk setup` writes) is refused whole: it names a file, a record or a
coordinate."""

from __future__ import annotations

import os
from pathlib import Path

import mcp
import pytest
from serverkit import HUB, ok, params
from test_node_secrets import anyio_backend, github_token, password  # noqa: F401 (a fixture)
from writekit import make_repo

from osk.capture.secrets import mask_secrets
from osk.errors import SecretInName, SetupError
from osk.hosts import hostsetup
from osk.store.fsutil import sha256_bytes
from osk.store.vault import Vault

pytestmark = pytest.mark.anyio

def everything(root: Path) -> str:
    """Every byte under the vault, device state (.osk/) included."""
    parts = []
    for folder, _, files in os.walk(root):
        parts.append(folder)
        for name in files:
            parts.append(name)
            parts.append((Path(folder) / name).read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


async def refused(client: mcp.Client, name: str, args: dict[str, object], field: str,
                  secret: str) -> None:
    result = await client.call_tool(name, args)
    assert result.is_error, f"{name} accepted a secret in {field}"
    message = result.content[0].text
    assert field in message and "github-token" in message and "secret-filter" in message
    assert secret not in message


async def test_append_raw_refuses_a_secret_in_its_conversation_completion_and_host(
        vault: Vault, repo: Path):  # noqa: F811
    token = github_token()
    turn = {"user": "hello", "assistant": "hi"}
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        await refused(client, "append_raw", {**turn, "conversation": f"conv-{token}"},
                      "conversation id", token)
        await refused(client, "append_raw", {**turn, "conversation": "c1",
                                             "completion": token}, "completion", token)
        await refused(client, "append_raw", {**turn, "conversation": "c1", "host": token},
                      "host", token)
        done = await ok(client, "append_raw", {**turn, "conversation": "c1",
                                               "completion": "msg_01", "host": "kiro"})
        assert done["coordinate"].endswith("/c1#Round 1")
    assert token not in everything(vault.root)


async def test_node_writes_refuse_a_secret_in_drafter_cluster_and_a_cited_path(
        vault: Vault, repo: Path):  # noqa: F811
    token = github_token()
    (repo / "notes.txt").write_text("plain\n", encoding="utf-8")
    node = {**HUB, "title": "Deploy", "summary": "how we deploy", "body": "Deploy.\n"}
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        await ok(client, "create_node", HUB)
        await refused(client, "create_node", {**node, "drafter": f"model {token}"}, "drafter",
                      token)
        await refused(client, "create_node", {**node, "cluster": f"cache/{token}"},
                      "cluster folder", token)
        await refused(client, "create_node", {**node, "derived_from": [f"[[file:{token}.txt]]"]},
                      "derived-from path", token)
        await ok(client, "create_node", {**node, "derived_from": ["[[file:notes.txt]]"]})
        await refused(client, "update_node", {"node": "Deploy", "summary": "new",
                                              "drafter": token}, "drafter", token)
    assert token not in everything(vault.root)  # front matter, _objects/, the audit ledger


async def test_read_raw_filters_a_project_file_and_refuses_git_s_own_folder(
        vault: Vault, repo: Path):  # noqa: F811
    token = github_token()
    env = f"GITHUB_TOKEN={token}\nDB_PASSWORD={password()}\nPORT=8080\n"
    (repo / ".env").write_text(env, encoding="utf-8")
    subprocess_config = repo / ".git" / "config"
    subprocess_config.write_text(subprocess_config.read_text(encoding="utf-8")
                                 + f'[remote "origin"]\n\turl = https://x:{token}@example.com/r\n',
                                 encoding="utf-8")
    (repo / "docs").mkdir()
    (repo / "docs" / "git-config").symlink_to(subprocess_config)
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        read = await ok(client, "read_raw", {"coordinate": "file:.env"})
        assert read["text"] == ("GITHUB_TOKEN=[REDACTED:github-token]\n"
                                "DB_PASSWORD=[REDACTED:password]\nPORT=8080\n")
        assert read["hash"] == sha256_bytes(env.encode())  # citations bind to the file
        for coordinate in ("file:.git/config", "[[file:.git/config]]", "file:docs/git-config",
                           "file:sub/.GIT/config"):
            result = await client.call_tool("read_raw", {"coordinate": coordinate})
            assert result.is_error, coordinate
            assert token not in result.content[0].text
        result = await client.call_tool("read_raw", {"coordinate": "file:docs/git-config"})
        assert ".git/" in result.content[0].text
        outside = await client.call_tool("read_raw", {"coordinate": "file:../../x"})
        assert outside.is_error


def test_scope_names_and_setup_paths_holding_a_secret_are_refused(vault: Vault,
                                                                 tmp_path: Path):
    from osk.provenance.sessions import checked_scope_name

    token = github_token()
    with pytest.raises(SecretInName) as caught:
        checked_scope_name(f"team-{token}")
    assert token not in str(caught.value)
    ctx = hostsetup.Context(home=tmp_path / "home", vault=tmp_path / token,
                            osk_command=hostsetup.osk_command())
    with pytest.raises(SecretInName):
        hostsetup.plan("claude", ctx)
    with pytest.raises(SetupError):  # an unknown host is still refused first
        hostsetup.plan("nohost", ctx)
    assert not (tmp_path / "home").exists()


async def test_a_title_naming_an_aws_secret_key_is_refused(vault: Vault, repo: Path):  # noqa: F811
    import random
    import string

    rng = random.Random(25)
    key = "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(39)) + "Q"
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        await ok(client, "create_node", HUB)
        result = await client.call_tool("create_node", {
            **HUB, "title": f"aws_secret_access_key {key}", "summary": "s", "body": "b\n"})
        assert result.is_error and "aws-secret-key" in result.content[0].text
    assert key not in everything(vault.root)


def test_ordinary_ids_and_names_pass_the_check():
    # What hosts and agents send: message ids, UUIDs, model names, host names, folders.
    for value in ("msg_01XFDUDYJgAACzvnptvVoYEL", "0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b",
                  "claude-opus-4-5", "gpt-5.1-codex", "kiro", "antigravity", "auth/tokens",
                  "rollout-2026-12-02T10-11-12-0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b",
                  "toolu_01A09q90qw90lq917835lq9", "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"):
        assert not mask_secrets(value).changed, value


def test_a_hook_names_a_conversation_whose_id_holds_a_secret_by_its_hash(vault: Vault,
                                                                       tmp_path: Path):
    # A hook never refuses the user's turn: the host's id becomes a hash, and the round is
    # captured under it; the id itself reaches no file or file name.
    import json

    from hookkit import copy_fixture, make_project, payload, run_hook

    from osk.capture import raw
    from osk.hooks.state import conversation_name
    from osk.store.fsutil import sha256_text

    token = github_token()
    session = f"sess-{token}"
    project = make_project(tmp_path / "shop")
    transcript = copy_fixture("claude", "session.jsonl", tmp_path / "t.jsonl")
    data = json.loads(payload("claude", "stop", transcript=transcript, cwd=project))
    data["session_id"] = session
    done = run_hook("stop", "claude", json.dumps(data).encode(), cwd=project)
    assert (done.returncode, done.stderr) == (0, "")
    name = f"conversation-{sha256_text(session)[:16]}"
    assert conversation_name(session) == name
    assert len(raw.read_record(vault, "shop", name).rounds) == 5
    assert token not in everything(vault.root)
    plain = "5b0c7a52-8f1e-4d7a-9a63-2c4f1e9d0b11"
    assert conversation_name(plain) == plain  # a host's UUID is kept as it is


def test_a_project_folder_named_with_a_secret_gets_a_hashed_session_key(vault: Vault,
                                                                       tmp_path: Path):
    from osk.calls.request import NewNode
    from osk.engine.core import Engine

    token = github_token()
    eng = Engine.open(vault, cwd=make_repo(tmp_path / f"app-{token}"))
    assert eng.session.key.key.startswith("project-") and token not in eng.session.key.key
    eng.append_raw("c1", user="hi", assistant="hello")
    eng.create_node(NewNode("cache", "The cache", "Hub.\n", space="Scope", cluster="cache",
                            drafter="test-model"))
    # Raw folder, scope folder, every ledger: none says it. Only this device's own record of
    # where the project is (never synced; it finds the project's files) holds its path.
    holding = sorted(str(p.relative_to(vault.root)) for p in vault.root.rglob("*")
                     if token in p.name or (p.is_file() and token.encode() in p.read_bytes()))
    assert holding == [".osk/sessions/roots.json", ".osk/sessions/worktrees.json"]
    plain = Engine.open(vault, cwd=make_repo(tmp_path / "shop-2024-backend-v2"))
    assert plain.session.key.key == "shop-2024-backend-v2"
