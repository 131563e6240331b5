"""The tree shows the plan: each wing of osk/ imports only itself and the wings below it, and no
module imports one that imports it back (docs/ARCHITECTURE.md draws the same layers).

Read from the code itself (ast), every import counts: at the top of a module, inside a function
(a lazy import is still a dependency), under ``TYPE_CHECKING``, and ``import_module`` of a
literal ``osk.…`` name. The hook path's own rule (standard library only) is checked at run time
by ``tests/hooks/test_hooks_failures.py``; a fresh ``osk search`` importing no write path, by
``tests/surfaces/test_search_cli.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Bottom to top. A wing may import its own modules and those of wings on lower layers only;
# wings on one layer know nothing of each other. "base" is osk/__init__.py and osk/errors.py
# (the refusals every wing raises); the engine room is four layers: what a call takes, shares
# and hands back ("calls"), the read side and the write path beside each other, the one engine,
# and the verbs that run above it; "entry" is ``python -m osk``.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("store",),
    ("capture", "authority"),
    ("provenance", "search", "sync"),
    ("hooks",),
    ("calls",),
    ("reads", "writes"),
    ("engine",),
    ("verbs",),
    ("hosts",),
    ("surfaces",),
    ("entry",),
)
LAYER = {wing: rank for rank, wings in enumerate(LAYERS) for wing in wings}


def module_names(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "osk").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def wing_of(module: str) -> str:
    parts = module.split(".")
    if module in ("osk", "osk.errors"):
        return "base"
    if module == "osk.__main__":
        return "entry"
    if len(parts) == 2 and parts[1] not in LAYER:
        return "loose"  # a module at the top of osk/: on no layer, so the first test names it
    return parts[1]


_PACKAGES: set[str] = set()


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import in a module, wherever it sits."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", None)) == "import_module" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value
            elif isinstance(first, ast.JoinedStr) and first.values and isinstance(
                    first.values[0], ast.Constant):
                yield node.lineno, str(first.values[0].value).rstrip(".")


def graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {module it imports: the first line that does}."""
    modules = module_names(root)
    _PACKAGES.clear()
    _PACKAGES.update(m for m, p in modules.items() if p.name == "__init__.py")
    edges: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        out = edges.setdefault(module, {})
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module and name.startswith("osk"):
                if name == "osk" or (name in _PACKAGES and module.startswith(name + ".")):
                    continue  # a package's own __init__ (it imports nothing heavy: see below)
                out.setdefault(name, line)
    return edges


def upward(root: Path) -> list[str]:
    """Every import of a wing on the same or a higher layer than the importer's own."""
    found = []
    for module, targets in graph(root).items():
        mine = wing_of(module)
        for target, line in targets.items():
            theirs = wing_of(target)
            if theirs != mine and LAYER.get(theirs, 99) >= LAYER.get(mine, -1):
                found.append(f"{module}:{line} ({mine}) imports {target} ({theirs})")
    return found


def circles(root: Path) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    edges = graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def test_every_wing_of_osk_is_on_a_layer():
    wings = {wing_of(m) for m in module_names(ROOT)}
    assert wings - set(LAYER) == set(), "a new wing: give it a layer here and in ARCHITECTURE.md"


def test_the_top_of_osk_holds_folders_and_the_package_face_only():
    """``ls osk/``: the wings' folders, the package's face (``__init__``, ``__main__``) and
    the error family; every other module lives in the folder of its concept."""
    loose = sorted(path.name for path in (ROOT / "osk").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]
    folders = {path.name for path in (ROOT / "osk").iterdir()
               if path.is_dir() and (path / "__init__.py").exists()}
    assert folders == set(LAYER) - {"base", "entry"}


def test_a_wing_imports_only_itself_and_the_wings_below_it():
    assert upward(ROOT) == []


def test_no_module_imports_one_that_imports_it_back():
    assert circles(ROOT) == []


def test_wing_packages_import_nothing():
    """A wing's __init__ is its docstring: importing one module of a wing loads no other."""
    for module, path in module_names(ROOT).items():
        if path.name == "__init__.py" and module.count(".") == 1 and module != "osk.search":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            assert not any(isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(tree)), \
                module


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp


def test_the_checks_see_an_upward_import_even_inside_a_function(tmp_path: Path):
    root = _tree(tmp_path, {
        "osk/__init__.py": "",
        "osk/store/__init__.py": "",
        "osk/store/vault.py": "def f():\n    from osk.surfaces.cli import main\n",
        "osk/surfaces/__init__.py": "",
        "osk/surfaces/cli.py": "from osk.store import vault\n",
        "osk/engine/core.py": "import importlib\nimportlib.import_module(f'osk.surfaces.{1}')\n",
    })
    assert upward(root) == [
        "osk.engine.core:2 (engine) imports osk.surfaces (surfaces)",
        "osk.store.vault:2 (store) imports osk.surfaces.cli (surfaces)",
    ]
    assert circles(root) == [["osk.store.vault", "osk.surfaces.cli"]]


def test_an_ordered_tree_passes(tmp_path: Path):
    root = _tree(tmp_path, {
        "osk/__init__.py": "",
        "osk/errors.py": "",
        "osk/store/__init__.py": "",
        "osk/store/vault.py": "from osk.errors import OskError\n",
        "osk/surfaces/__init__.py": "",
        "osk/surfaces/cli.py": "from osk.store import vault\nfrom osk import engine\n",
        "osk/engine/core.py": "from osk.store.vault import Vault\n",
    })
    assert upward(root) == [] and circles(root) == []
