"""`osk doctor`: the vault, each host's registration, a real `osk mcp` and a dry-run hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from osk.hooks import growth
from osk.hosts import hostsetup
from osk.store.vault import Vault
from osk.surfaces.cli import main


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    return _isolated_home


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["doctor", *args])
    out = capsys.readouterr().out
    return code, out.splitlines()


def line(lines: list[str], prefix: str) -> str:
    (found,) = [text for text in lines if text.startswith(prefix)]
    return found


def test_doctor_passes_a_complete_setup_with_a_real_server_and_hook(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "claude", "--yes"]) == 0
    capsys.readouterr()

    code, lines = doctor(capsys, "--host", "claude")

    assert code == 0, "\n".join(lines)
    assert line(lines, "[ok  ] vault:") == f"[ok  ] vault: {vault.root}"
    assert line(lines, "[ok  ] claude setup:").endswith("registered for this vault")
    assert line(lines, "[ok  ] mcp server:").startswith("[ok  ] mcp server: started and listed ")
    assert line(lines, "[ok  ] claude hook:").startswith(
        "[ok  ] claude hook: a dry-run session start succeeded")
    assert lines[-1] == "All checks passed."


def test_doctor_names_a_detected_host_without_osk_as_information_not_a_failure(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / ".codex").mkdir()  # Codex is installed here, osk is not registered with it

    code, lines = doctor(capsys)

    assert code == 0, "\n".join(lines)
    info = "[info] codex setup: osk is not registered at user level"
    assert line(lines, "[info] codex setup:") == info
    assert lines[lines.index(info) + 1].startswith("       fix: osk setup codex (or, ")
    assert line(lines, "  codex:") == (
        "  codex: found here, osk not set up (information, not a failure)")
    assert line(lines, "  claude:") == "  claude: not found on this machine"
    assert not any(text.startswith("[") and "claude" in text for text in lines)
    assert lines[-1] == "All checks passed."


def test_doctor_gives_a_verdict_line_per_host_and_fails_only_for_a_broken_set_up_host(
    vault: Vault, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "claude", "--yes"]) == 0
    ctx = hostsetup.Context(home=home, vault=tmp_path / "elsewhere",
                            osk_command=hostsetup.osk_command(), codex_home=home / ".codex")
    hostsetup.apply(hostsetup.plan("kiro", ctx), ctx)  # kiro: set up, for the wrong vault
    (home / ".codex").mkdir()  # codex: installed, not set up
    capsys.readouterr()

    code, lines = doctor(capsys)

    assert code == 1
    verdicts = lines[lines.index("Hosts:") + 1:lines.index("Hosts:") + 5]
    assert verdicts == [
        "  claude: working",
        "  codex: found here, osk not set up (information, not a failure)",
        "  kiro: BROKEN (kiro setup)",
        "  antigravity: not found on this machine",
    ]
    assert lines[-1] == "1 check(s) failed."

    code, lines = doctor(capsys, "--host", "claude", "--host", "codex")

    assert code == 0, "\n".join(lines)
    assert not any("kiro" in text for text in lines)
    assert lines[lines.index("Hosts:") + 1:] == [
        "  claude: working",
        "  codex: found here, osk not set up (information, not a failure)",
        "",
        "All checks passed.",
    ]


def test_doctor_runs_every_per_host_check_only_for_a_set_up_host(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from osk.hosts import doctor as checks

    seen: list[str] = []

    def extra(site: checks.HostSite) -> list[checks.Check]:
        seen.append(site.host)
        return [checks.Check(f"{site.host} capture", False, "the transcript grew, nothing kept",
                             "see the hook log")]

    monkeypatch.setattr(checks, "HOST_CHECKS", (*checks.HOST_CHECKS, extra))
    assert main(["setup", "kiro", "--yes"]) == 0
    (home / ".codex").mkdir()
    capsys.readouterr()

    code, lines = doctor(capsys)

    assert seen == ["kiro"]
    assert code == 1
    assert line(lines, "[FAIL] kiro capture:") == (
        "[FAIL] kiro capture: the transcript grew, nothing kept")
    assert line(lines, "  kiro:") == "  kiro: BROKEN (kiro capture)"


def test_doctor_notices_a_host_set_up_for_another_vault(
    vault: Vault, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = hostsetup.Context(home=home, vault=tmp_path / "elsewhere",
                            osk_command=hostsetup.osk_command(), codex_home=home / ".codex")
    hostsetup.apply(hostsetup.plan("kiro", ctx), ctx)

    code, lines = doctor(capsys, "--host", "kiro")

    assert code == 1
    assert line(lines, "[FAIL] kiro setup:") == (
        f"[FAIL] kiro setup: registered for another vault ({tmp_path / 'elsewhere'})")


def test_doctor_checks_a_project_setup_when_asked(
    vault: Vault, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert main(["setup", "kiro", "--project", str(project), "--yes"]) == 0
    capsys.readouterr()

    code, lines = doctor(capsys, "--host", "kiro", "--project", str(project))

    assert code == 0, "\n".join(lines)
    assert line(lines, "[ok  ] kiro hook:").startswith("[ok  ] kiro hook: a dry-run")


def test_doctor_without_a_vault_says_how_to_make_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = doctor(capsys)

    assert code == 1
    assert line(lines, "[FAIL] vault:").startswith("[FAIL] vault: no osk vault found")
    assert "osk init PATH" in lines[1]


def test_doctor_reports_a_server_that_does_not_start(
    vault: Vault, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken-osk"
    broken.write_text("#!/bin/sh\necho 'no such module' >&2\nexit 1\n", encoding="utf-8")
    broken.chmod(0o755)
    monkeypatch.setattr(hostsetup, "osk_command", lambda: (str(broken),))

    code, lines = doctor(capsys, "--host", "antigravity")

    assert code == 1
    assert line(lines, "[FAIL] mcp server:").endswith(
        "failed: the MCP server exited before answering: no such module")


def tiny_server(tmp_path: Path, tools: list[str], call_error: str | None = None) -> Path:
    """A stand-in MCP server: answers the handshake listing ``tools``; a tool call gets
    ``call_error`` as a JSON-RPC error (else the initialize result again)."""
    script = tmp_path / "tiny_server.py"
    script.write_text(
        "import json, sys\n"
        f"tools, call_error = {tools!r}, {call_error!r}\n"
        "for raw in sys.stdin:\n"
        "    msg = json.loads(raw)\n"
        "    if 'id' not in msg:\n"
        "        continue\n"
        "    answer = {'result': {'protocolVersion': '2025-06-18', 'capabilities': {},\n"
        "                         'serverInfo': {'name': 'tiny', 'version': '0'}}}\n"
        "    if msg['method'] == 'tools/list':\n"
        "        answer = {'result': {'tools': [{'name': n, 'inputSchema': {}} for n in tools]}}\n"
        "    if msg['method'] == 'tools/call' and call_error:\n"
        "        answer = {'error': {'code': -32603, 'message': call_error}}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], **answer}), flush=True)\n",
        encoding="utf-8")
    return script


def test_doctor_reports_a_server_that_lacks_the_tools_osk_relies_on(
    vault: Vault, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    script = tiny_server(tmp_path, ["search"])
    monkeypatch.setattr(hostsetup, "osk_command", lambda: (sys.executable, str(script)))

    code, lines = doctor(capsys, "--host", "antigravity")

    assert code == 1
    assert "lacks the tool(s) read_node, read_raw, overview" in line(lines, "[FAIL] mcp server:")


def test_doctor_reports_background_reviews_that_fell_back(
    vault: Vault, home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["setup", "claude", "--yes"]) == 0
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    growth.set_fallback(vault, "claude", "unfinished", "2 background reviews in a row did not "
                                                        "finish; reviews run in-session")
    capsys.readouterr()

    code, lines = doctor(capsys, "--host", "claude")

    assert code == 1
    failed = line(lines, "[FAIL] claude background reviews:")
    assert failed.endswith(": 2 background reviews in a row did not finish; reviews run "
                           "in-session")
    fix = lines[lines.index(failed) + 1]
    assert str(growth.fallback_path(vault, "claude")) in fix
    flag = json.loads(growth.fallback_path(vault, "claude").read_text(encoding="utf-8"))
    assert flag["reason"] == "unfinished"


def test_doctor_fails_a_server_that_lists_its_tools_but_cannot_run_one(
    vault: Vault, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    # The handshake can come from the last run's, so a listing alone proves little.
    from osk.hosts.doctor import NEEDED_TOOLS

    script = tiny_server(tmp_path, list(NEEDED_TOOLS), call_error="the osk MCP server could "
                                                                  "not start")
    monkeypatch.setattr(hostsetup, "osk_command", lambda: (sys.executable, str(script)))

    code, lines = doctor(capsys, "--host", "antigravity")

    assert code == 1
    assert "a first tool call (overview) failed: " in line(lines, "[FAIL] mcp server:")
    assert "could not start" in line(lines, "[FAIL] mcp server:")


# A server that answers the way osk's did before one connection kept one protocol generation:
# its front took every connection for classic, so it answered Claude Code's fallback
# initialize from the kept classic handshake while the SDK served the probe's envelope.
BLIND_FRONT = """\
import sys
from osk.surfaces import stdio
stdio.generation = lambda message: stdio.CLASSIC
from osk.surfaces.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("blind", [True, False], ids=["the old front", "this front"])
def test_doctor_connects_as_each_host_does_and_names_the_host_a_server_fails(
    blind: bool, vault: Vault, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    if blind:
        script = tmp_path / "osk_blind_front.py"  # "osk" in it: setup knows its own hooks
        script.write_text(BLIND_FRONT, encoding="utf-8")
        monkeypatch.setattr(hostsetup, "osk_command", lambda: (sys.executable, str(script)))
    for host in ("claude", "codex"):
        assert main(["setup", host, "--yes"]) == 0
    capsys.readouterr()

    code, lines = doctor(capsys, "--host", "claude", "--host", "codex")

    # The plain check (doctor's own classic client) passes either way, and keeps the classic
    # handshake that the old front then answered Claude Code's initialize from.
    assert line(lines, "[ok  ] mcp server:"), "\n".join(lines)
    assert line(lines, "[ok  ] codex connection:").endswith(
        "connected as Codex 0.171.0 does (classic protocol); every tool call was answered")
    if blind:
        assert code == 1
        failed = line(lines, "[FAIL] claude connection:")
        assert failed.startswith("[FAIL] claude connection: as Claude Code 2.1.332 connects "
                                 "(it keeps the classic protocol it was answered in first)")
        assert "params._meta is missing the required envelope key(s)" in failed
        assert line(lines, "  claude:") == "  claude: BROKEN (claude connection)"
    else:
        assert code == 0, "\n".join(lines)
        assert line(lines, "[ok  ] claude connection:").endswith(
            "connected as Claude Code 2.1.332 does (envelope protocol); every tool call was "
            "answered")
