"""Every function osk defines is called from osk itself (docs/ARCHITECTURE.md names no dead entry).

A function only tests call is a second copy of a rule waiting to drift from the one the
surfaces use; it goes, and its tests move to what osk does call. The few entry points reached
from outside osk's own code are named here, each with where it is reached from.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

OSK = Path(__file__).resolve().parents[2] / "osk"

REACHED_FROM_OUTSIDE = {
    "surface_lint": "tests/surfaces/test_surface_lint.py: the check that the MCP surface holds no "
                    "person-only verb, run in CI",
    "recheck": "Engine.recheck: the engine's recheck report, the tests' view of the candidates",
}


def _defined_and_referenced() -> tuple[list[tuple[str, int, str]], Counter[str]]:
    defined: list[tuple[str, int, str]] = []
    referenced: Counter[str] = Counter()
    for path in sorted(OSK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name):
                referenced[node.id] += 1
            elif isinstance(node, ast.Attribute):
                referenced[node.attr] += 1
            elif isinstance(node, ast.alias):
                referenced[node.name.rsplit(".", 1)[-1]] += 1
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not (
                    node.decorator_list or node.name.startswith(("__", "visit_"))):
                # decorated ones are registered (validators, atexit, properties); dunders and
                # ast visitors are called by name by Python itself
                defined.append((str(path.relative_to(OSK.parent)), node.lineno, node.name))
    return defined, referenced


def test_every_function_is_called_from_osk():
    defined, referenced = _defined_and_referenced()
    dead = [f"{path}:{line} {name}" for path, line, name in defined
            if not referenced[name] and name not in REACHED_FROM_OUTSIDE]
    assert dead == []


def test_the_entry_points_named_as_reached_from_outside_still_exist():
    defined, _ = _defined_and_referenced()
    assert set(REACHED_FROM_OUTSIDE) <= {name for _, _, name in defined}
