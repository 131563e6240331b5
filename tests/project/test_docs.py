"""The docs cannot go stale: every command, tool, error, rule, ledger and device-state file that
the code defines is documented, and the generated CLI reference matches the real parser."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from osk import errors
from osk.store.vault import Vault

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GOVERNANCE = ROOT / "governance"
GENERATOR = ROOT / "scripts" / "gen_cli_docs.py"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _error_classes() -> list[type[errors.OskError]]:
    return [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
            if issubclass(cls, errors.OskError) and cls.__module__ == errors.__name__]


def _top_level_commands() -> list[str]:
    from osk.surfaces.cli import build_parser

    parser = build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert found, "osk's parser has no subcommands"
    return list(found[0].choices)


def _section(text: str, heading: str) -> str:
    """The text from ``heading`` to the next heading of the same or a higher level."""
    start = text.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    rest = text[start + len(heading):]
    stop = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: stop.start()] if stop else rest


# -- the CLI reference -------------------------------------------------------------------------
def test_the_cli_reference_in_docs_matches_the_real_parser():
    generator = _generator()
    current = _text(DOCS / "cli.md")
    assert generator.replace_block(current, generator.render()) == current, (
        "docs/cli.md is out of date: run `.venv/bin/python scripts/gen_cli_docs.py`")


def test_every_top_level_command_and_the_hook_entry_have_a_section_in_cli_docs():
    text = _text(DOCS / "cli.md")
    missing = [name for name in [*_top_level_commands(), "hook"]
               if f"### `osk {name}`" not in text]
    assert not missing, f"docs/cli.md has no section for: {missing}"


def test_the_generator_check_fails_on_a_stale_reference_and_writes_nothing(tmp_path, monkeypatch):
    generator = _generator()
    stale = _text(DOCS / "cli.md").replace("### `osk init`", "### `osk init-old`")
    copy = tmp_path / "cli.md"
    copy.write_text(stale, encoding="utf-8")
    monkeypatch.setattr(generator, "DOC", copy)
    assert generator.main(["--check"]) == 1
    assert _text(copy) == stale
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0
    assert _text(copy) == _text(DOCS / "cli.md")


def test_the_generator_check_passes_when_run_as_a_script():
    result = subprocess.run([sys.executable, str(GENERATOR), "--check"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


# -- errors ---------------------------------------------------------------------------------
_ROW = re.compile(r"^\| `(?P<name>\w+)` \| (?:`(?P<rule>[a-z-]+)`|—) \| (?P<code>\d+) \|",
                  flags=re.MULTILINE)


def test_every_osk_error_is_in_the_errors_table_with_its_rule_and_exit_code():
    rows = {m["name"]: (m["rule"] or "", int(m["code"]))
            for m in _ROW.finditer(_text(DOCS / "errors.md"))}
    wrong = {}
    for cls in _error_classes():
        expected = (cls.rule, cls.exit_code)
        if rows.get(cls.__name__) != expected:
            wrong[cls.__name__] = {"code": expected, "docs/errors.md": rows.get(cls.__name__)}
    assert not wrong, f"docs/errors.md's table disagrees with osk/errors.py: {wrong}"


def test_every_osk_error_has_its_own_section_in_the_errors_doc():
    text = _text(DOCS / "errors.md")
    missing = [cls.__name__ for cls in _error_classes() if f"### `{cls.__name__}`" not in text]
    assert not missing, f"docs/errors.md has no section for: {missing}"


# -- MCP tools -------------------------------------------------------------------------------
def test_every_mcp_tool_has_a_section_in_the_tools_doc():
    from osk.surfaces.server import TOOL_NAMES

    headings = set(re.findall(r"^### (\S+)\s*$", _text(DOCS / "tools.md"), flags=re.MULTILINE))
    missing = [name for name in TOOL_NAMES if name not in headings]
    assert not missing, f"docs/tools.md has no '### name' section for: {missing}"


# -- governance rules ------------------------------------------------------------------------
def _rule_names() -> set[str]:
    declared = set(re.findall(r'rule(?::\s*str)?\s*=\s*"([^"]+)"',
                              _text(ROOT / "osk" / "errors.py")))
    return declared | {cls.rule for cls in _error_classes() if cls.rule}


def test_every_rule_an_error_names_is_listed_in_the_governance_readme():
    readme = _text(GOVERNANCE / "README.md")
    missing = sorted(rule for rule in _rule_names() if f"`{rule}`" not in readme)
    assert not missing, f"governance/README.md does not list: {missing}"


def test_every_rule_an_error_names_is_explained_in_bold_on_a_governance_page():
    pages = "\n".join(_text(p) for p in sorted(GOVERNANCE.glob("*.md")) if p.name != "README.md")
    bold = " ".join(re.findall(r"\*\*([^*]+)\*\*", pages))
    missing = sorted(rule for rule in _rule_names()
                     if not re.search(rf"(?<![\w-]){re.escape(rule)}(?![\w-])", bold))
    assert not missing, f"no governance page explains (in a bold rule name): {missing}"


# -- FORMAT.md -------------------------------------------------------------------------------
def _ledger_kinds() -> dict[str, set[str]]:
    from osk.authority import audit, protection, tombstones
    from osk.capture import exclusions
    from osk.provenance import candidates, recheck_table, scope_memory, sessions

    return {
        sessions.LEDGER: {sessions.KIND_OWNER, sessions.KIND_BIND},
        recheck_table.LEDGER: {recheck_table.KIND_PAIRS},
        candidates.LEDGER: {candidates.KIND_CANDIDATE, candidates.KIND_DISMISS},
        scope_memory.EVICTIONS: {scope_memory.KIND_EVICT, scope_memory.KIND_SETTLE},
        audit.AUDIT: set(audit.ACTIONS),
        protection.APPROVALS: set(),
        tombstones.TOMBSTONES: set(),
        exclusions.LEDGER: {exclusions.KIND_EXCLUDE, exclusions.KIND_INCLUDE},
    }


def test_every_ledger_has_a_format_section_naming_its_record_kinds():
    text = _text(DOCS / "FORMAT.md")
    problems = {}
    for ledger, kinds in _ledger_kinds().items():
        heading = re.search(rf"^### 3\.\d+ `{ledger}`.*$", text, flags=re.MULTILINE)
        if heading is None:
            problems[ledger] = "no '### 3.N `name`' section"
            continue
        body = _section(text, heading.group(0))
        absent = sorted(kind for kind in kinds if f"`{kind}`" not in body)
        if absent:
            problems[ledger] = f"kinds not described: {absent}"
    assert not problems, f"docs/FORMAT.md: {problems}"


def test_every_device_state_folder_the_code_uses_is_in_the_format_doc():
    # vault.state("name", …) calls, and path tuples such as rechecks.SUMMARY_FILE = ("rechecks", …)
    pattern = re.compile(r'(?:\.state\(|_FILE\s*=\s*\()\s*"([^"]+)"')
    used = set()
    for path in (ROOT / "osk").rglob("*.py"):
        used.update(pattern.findall(_text(path)))
    assert used, "found no device state in osk/ (did vault.state change its name?)"
    device_state = _section(_text(DOCS / "FORMAT.md"), "## 8. Device state")
    missing = sorted(name for name in used
                     if f"`{name}`" not in device_state and f"`{name}/" not in device_state)
    assert not missing, f"docs/FORMAT.md section 8 does not describe .osk/: {missing}"


def _repair_block(marker: str) -> str:
    text = _text(DOCS / "FORMAT.md")
    start = text.index(f"<!-- repair: {marker}")
    match = re.search(r"```python\n(.*?)```", text[start:], flags=re.DOTALL)
    assert match is not None, f"no python block after the {marker!r} marker"
    return match.group(1)


def _forked_binding(vault: Vault, key: str, scopes: tuple[str, str]) -> None:
    """Two devices bound ``key`` concurrently, as a union merge of their appends leaves it."""
    from osk.store.ids import uuid7

    first = uuid7()
    lines = []
    for record_id, device, scope in ((first, "aaaaaaaaaaaa", scopes[0]),
                                     (uuid7(after=first), "bbbbbbbbbbbb", scopes[1])):
        lines.append(json.dumps({"id": record_id, "parents": [], "device": device,
                                 "at": "2026-11-29T09:00:00+00:00", "kind": "bind",
                                 "subject": f"key:{key}", "key": key, "scope": scope}))
    vault.ledger_path("routing").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_documented_fork_repair_closes_a_forked_session_binding(vault):
    from osk.errors import LedgerFork
    from osk.provenance.sessions import Routing
    from osk.store.ledger import Ledger

    _forked_binding(vault, "assetctl", ("assetctl", "elsewhere"))
    with pytest.raises(LedgerFork):
        Routing(vault).scope_for("assetctl")
    exec(compile(_repair_block("close-fork"), "docs/FORMAT.md", "exec"), {})
    assert Routing(vault).scope_for("assetctl") == "assetctl"
    assert Ledger(vault, "routing").read().forks() == []


# -- hosts -----------------------------------------------------------------------------------
def test_the_hosts_page_links_a_setup_page_for_every_host_and_every_page_exists():
    from osk.hooks.adapters import HOSTS

    linked = set(re.findall(r"\]\(hosts/([\w-]+)\.md\)", _text(DOCS / "hosts.md")))
    pages = {path.stem for path in (DOCS / "hosts").glob("*.md")}
    assert linked == pages == set(HOSTS), (
        f"docs/hosts.md links {sorted(linked)}; docs/hosts/ holds {sorted(pages)}; "
        f"the hosts are {sorted(HOSTS)}")
