"""A leading underscore means "private to this module": no other module of osk/ uses the name.

Read from the code (ast), every use counts wherever it sits (module level or inside a function):
``from osk.x import _y``, and ``m._y`` where ``m`` names an osk module (``import osk.x as m``,
``from osk import x``, or the dotted path ``osk.x._y`` itself). ``__dunder__`` names are the
language's, not ours, and are left alone. A name that two modules need is public: it drops the
underscore, or moves to the module that owns the concept.

The rule covers osk/ only. tests/ may reach a module's private names, since a test of a
module's inner piece stands in for that module; a helper shared between test files is public
in its own file (tests/writekit.py, tests/hookkit.py, ...).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from test_layering import ROOT, module_names

MODULES = module_names(ROOT)


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def bound_modules(tree: ast.AST) -> dict[str, str]:
    """Local name -> the osk module it stands for, from every import in the module."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "osk":
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound["osk"] = "osk"
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:
                    bound[alias.asname or alias.name] = full
    return bound


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None when the chain is not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def crossings(module: str, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, "osk.owner._name") for each private name of another osk module used here."""
    bound = bound_modules(tree)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] == "osk" and node.module != module:
                for alias in node.names:
                    if private(alias.name):
                        yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            name = attribute_of_module(bound, dotted(node))
            if name and name.rpartition(".")[0] != module and private(name.rpartition(".")[2]):
                yield node.lineno, name


def attribute_of_module(bound: dict[str, str], parts: list[str] | None) -> str | None:
    """"osk.owner.name" for the first name after the modules in ``osk.x.y.name.more``."""
    if not parts or parts[0] not in bound or len(parts) < 2:
        return None
    owner = bound[parts[0]]
    for name in parts[1:]:
        if f"{owner}.{name}" not in MODULES:
            return f"{owner}.{name}"
        owner = f"{owner}.{name}"
    return None


def test_no_module_uses_another_modules_private_names() -> None:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in crossings(module, tree):
            found.append(f"{path.relative_to(ROOT)}:{line} uses {name}")
    assert not found, f"{len(found)} private names cross a module border:\n" + "\n".join(found)


def test_the_reader_sees_each_form_of_crossing() -> None:
    code = """
import osk.store.node
import osk.store.ids as ids
from osk.store import vault
from osk.store.edges import _parse, __all__
osk.store.node._keys
ids._mint()
vault._lock.acquire()
vault.open_vault._cache
osk.store.node.__name__
"""
    found = sorted(name for _, name in crossings("osk.sync.cycle", ast.parse(code)))
    assert found == ["osk.store.edges._parse", "osk.store.ids._mint", "osk.store.node._keys",
                     "osk.store.vault._lock"]
    assert not list(crossings("osk.store.vault", ast.parse("from osk.store import vault\n"
                                                             "vault._lock\n")))
