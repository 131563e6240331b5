"""The MCP surface lint: no person's verb and no authority ledger on the agent's tool surface."""

from __future__ import annotations

from pathlib import Path

import pytest

from osk.verbs import validate

SERVER = Path(__file__).resolve().parents[2] / "osk" / "surfaces" / "server.py"


def lint_source(tmp_path: Path, source: str) -> list[validate.Finding]:
    module = tmp_path / "planted_server.py"
    module.write_text(source, encoding="utf-8")
    return validate.surface_lint([module])


def test_the_real_server_module_passes_the_lint():
    assert SERVER.exists()
    assert validate.surface_lint([SERVER]) == []
    assert validate.default_surface_paths() == [SERVER]
    assert validate.surface_lint() == []


@pytest.mark.parametrize(
    ("source", "rule", "fragment"),
    [
        ("from osk.authority import protection\nprotection.approve(v, 'Scope/a')\n",
         "surface-authority", "approve"),
        ("def tool(engine):\n    return engine.revert_region('x')\n",
         "surface-authority", "revert"),
        ("import osk.authority.trust as t\nt.confirm(v, 'Node')\n", "surface-authority", "confirm"),
        ("from osk.authority.tombstones import lift\n", "surface-authority", "lift"),
        ("reject_claim(v)\n", "surface-authority", "reject"),
        ("x.unprotect(v, 'p')\n", "surface-authority", "unprotect"),
        ("c.dismiss(key, 'no')\n", "surface-authority", "dismiss"),
        ("engine.exclude_round('_raw/a/b#Round 1')\n", "surface-authority", "exclude"),
        ("from osk.verbs.exclusion import include\n", "surface-authority", "include"),
        ("import osk.verbs.exclusion\n", "surface-authority", "osk.verbs.exclusion"),
        ("path = '_ledger/exclusions.jsonl'\n", "surface-authority-ledger", "exclusions"),
        ("fn = getattr(module, 'approve')\n", "surface-authority", "dynamically"),
        ("import osk.authority.audit\n", "surface-authority", "osk.authority.audit"),
        ("from osk.verbs import person\n", "surface-authority", "osk.verbs.person"),
        ("from osk.store.ledger import Ledger\nLedger(v, 'approvals').append('k', 's', {})\n",
         "surface-authority-ledger", "approvals"),
        ("NAME = 'tombstones'\n", "surface-authority-ledger", "tombstones"),
        ("path = '_ledger/audit.jsonl'\n", "surface-authority-ledger", "audit"),
        ("import os\nos.unlink(p)\n", "surface-no-delete", "unlink"),
        ("engine.delete_node('x')\n", "surface-no-delete", "delete"),
    ],
)
def test_a_planted_bad_module_fails_the_lint(tmp_path: Path, source: str, rule: str,
                                             fragment: str):
    findings = lint_source(tmp_path, source)
    assert findings, "the lint must fail on this module"
    assert any(f.rule == rule and fragment in f.message for f in findings), findings
    assert all(f.path.endswith("planted_server.py") and "line " in f.message for f in findings)


def test_a_clean_module_using_the_engine_passes(tmp_path: Path):
    source = (
        "from osk.store.ledger import Ledger\n"
        "def create(engine, args):\n"
        "    Ledger(engine.vault, 'candidates').read()\n"
        "    return engine.create_node(title=args.title)\n"
        "DESCRIPTION = 'No tool here approves or reverts anything.'\n"
    )
    assert lint_source(tmp_path, source) == []
