"""The secret filter on node writes: body and summary are redacted before they are hashed,
cited or stored, through the real MCP server and through `osk import`; a title that holds a
secret is refused without echoing it."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import mcp
import pytest
from authority_support import osk
from serverkit import HUB, ok, params, snapshot

from osk.store.fsutil import sha256_text
from osk.store.vault import Vault

pytestmark = pytest.mark.anyio
RNG = random.Random(1402)
ALNUM = string.ascii_letters + string.digits


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def github_token() -> str:
    return "ghp_" + "".join(RNG.choice(ALNUM) for _ in range(36))


def password() -> str:
    return "".join(RNG.choice(ALNUM) for _ in range(14)) + "7q"


def vault_text(vault: Vault) -> str:
    """Every byte osk keeps in the vault outside device state: nodes, ledgers, objects."""
    return "\n".join(data.decode("utf-8", "replace") for data in snapshot(vault.root).values())


async def test_create_and_update_through_the_server_store_markers_never_the_secret(
        vault: Vault, repo: Path):  # noqa: F811
    token, pw, later = github_token(), password(), github_token()
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        await ok(client, "create_node", HUB)
        created = await ok(client, "create_node", {
            **HUB, "title": "Deploy notes", "summary": f"deploys with {token}",
            "body": f"Run the deploy.\n\nDB_PASSWORD={pw}\n"})
        assert created["redactions"] == [{"kind": "github-token", "count": 1},
                                         {"kind": "password", "count": 1}]
        path = vault.root / created["path"]
        stored = path.read_text(encoding="utf-8")
        assert "DB_PASSWORD=[REDACTED:password]" in stored
        assert "deploys with [REDACTED:github-token]" in stored
        assert created["hash"] == sha256_text(stored)  # the hash is of what was stored

        read = await ok(client, "read_node", {"node": "Deploy notes"})
        assert "[REDACTED:password]" in read["text"] and pw not in json.dumps(read)

        edited = await ok(client, "update_node", {
            "node": "Deploy notes", "old_text": "Run the deploy.",
            "new_text": f"Run the deploy with GITHUB_TOKEN={later}."})
        assert edited["redactions"] == [{"kind": "github-token", "count": 1}]
        replaced = await ok(client, "update_node", {
            "node": "Deploy notes", "expect_hash": edited["hash"],
            "body": f"Rewritten.\n\npassword: {pw}\n", "summary": "the deploy, in short"})
        assert replaced["redactions"] == [{"kind": "password", "count": 1}]
        assert replaced["hash"] == sha256_text(path.read_text(encoding="utf-8"))

        found = await ok(client, "search", {"query": pw})
        assert not any(hit["title"] == "Deploy notes" for hit in found["hits"])
        filed = await ok(client, "record_candidate", {
            "type": "duplication", "parties": ["Deploy notes", "cache"],
            "note": f"both mention the key {token}"})
        assert filed["candidate"]["note"] == "both mention the key [REDACTED:github-token]"
    kept = vault_text(vault)  # node files, the ledgers, _objects/ versions
    assert token not in kept and pw not in kept and later not in kept


async def test_a_title_holding_a_secret_is_refused_by_kind_and_never_echoed(
        vault: Vault, repo: Path):  # noqa: F811
    token = github_token()
    async with mcp.Client(params(vault, repo), mode="legacy") as client:
        await ok(client, "create_node", HUB)
        before = snapshot(vault.root)
        result = await client.call_tool("create_node", {**HUB, "title": f"key {token}"})
        assert result.is_error
        message = result.content[0].text
        assert "looks like a secret (github-token)" in message and token not in message
        assert snapshot(vault.root) == before


def test_osk_import_filters_every_line_it_loads(vault: Vault, tmp_path: Path):
    pw, token = password(), github_token()
    lines = [{"title": "Imported note", "summary": f"token {token}", "space": "domain",
              "body": f"conn = connect(password=\"{pw}\")\n"}]
    source = tmp_path / "nodes.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    run = osk(vault, "import", str(source))
    assert run.code == 0, run.err
    (node,) = vault.root.glob("Domain/**/Imported note.md")
    text = node.read_text(encoding="utf-8")
    assert 'password="[REDACTED:password]"' in text and "token [REDACTED:github-token]" in text
    kept = vault_text(vault)
    assert pw not in kept and token not in kept


def test_the_tests_secrets_have_the_shapes_the_filter_catches():
    # Guards the fixtures above: a secret the filter misses would make them pass vacuously.
    from osk.capture.secrets import mask_secrets

    assert mask_secrets(github_token()).changed
    assert mask_secrets(f"DB_PASSWORD={password()}").changed
