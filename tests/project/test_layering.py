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


# What a surface may import: the engine's public face (the one engine and the vault a command
# names, the verbs above it, what a call takes and hands back), the hosts wing, the error family
# and the surfaces themselves. Whatever else a command needs goes through one of them.
SURFACE_FACE = ("osk.engine", "osk.verbs", "osk.calls", "osk.hosts", "osk.errors", "osk.surfaces")
# The stated exceptions: (surface module, name it imports) and why it may.
SURFACE_EXCEPTIONS = {
    ("osk.surfaces.cli", "osk.hooks.main.run"):
        "`osk hook` runs on every turn: routed to the hooks' standard-library path before argparse",
    ("osk.surfaces.stdio", "osk.reads.quick_search"):
        "`osk mcp` answers a search sent with its handshake from the index before the engine loads",
    ("osk.surfaces.commands.search", "osk.reads.quick_search"):
        "a fresh `osk search` answers from the persisted index without loading the engine",
    ("osk.surfaces.commands.nodes", "osk.reads.quick_read"):
        "a fresh `osk read` answers from the persisted index and the node's file, no engine",
    ("osk.surfaces.early", "osk.search.versions.DEFAULT_K"):
        "the early front bounds k before the engine loads (the engine owns default and cap)",
    ("osk.surfaces.early", "osk.search.versions.MAX_K"): "the same bound",
    ("osk.surfaces.tool_models", "osk.search.versions.DEFAULT_K"):
        "the search tool's schema states the engine's default and cap",
    ("osk.surfaces.tool_models", "osk.search.versions.MAX_K"): "the same bound",
    ("osk.surfaces.stdio", "osk.store.fsutil.atomic_write"):
        "the stdio front keeps the handshake it learned, standard library only, before the engine",
    ("osk.surfaces.quickstart", "osk.capture.raw.list_records"):
        "the scripted demo shows the raw record its hooks wrote, as a narrator reading files",
    ("osk.surfaces.quickstart", "osk.store.edges.RawTarget"): "its coordinate, for the narration",
    ("osk.surfaces.quickstart", "osk.store.vault.Vault"): "the demo vault it narrates",
    ("osk.surfaces.cli", "osk.store.vault.disk_error"):
        "an edge of the error family: a full or read-only disk named, not a traceback",
    ("osk.surfaces.server", "osk.store.vault.disk_error"): "the other edge of the error family",
}


def around_the_engine(root: Path) -> list[str]:
    """Every name a surfaces module imports from outside the engine's public face that no
    stated exception covers (``from M import N`` counts as ``M.N``: N may be a module of M)."""
    found = []
    for module, path in module_names(root).items():
        if wing_of(module) != "surfaces":
            continue
        names: dict[int, set[str]] = {}
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            names.setdefault(line, set()).add(name)
        for line, here in names.items():
            for name in here:
                if any(other.startswith(name + ".") for other in here):
                    continue  # the M of ``from M import N``: N is what is imported
                if not _on_the_face(name) and not _stated(module, name):
                    found.append(f"{module}:{line} imports {name}")
    return sorted(found)


def _on_the_face(name: str) -> bool:
    return not name.startswith("osk.") or name == "osk.__version__" or any(
        name == face or name.startswith(face + ".") for face in SURFACE_FACE)


def _stated(module: str, name: str) -> bool:
    return any(module == importer and (name == what or name.startswith(what + "."))
               for importer, what in SURFACE_EXCEPTIONS)


def test_surfaces_go_through_the_engine_s_public_face():
    """One engine (or person-verbs) call per surface action: a command, a tool or the stdio
    front reaches the wings below through the engine, the verbs or the hosts wing only."""
    assert around_the_engine(ROOT) == []


def test_the_surface_rule_sees_a_wing_imported_around_the_engine(tmp_path: Path):
    root = _tree(tmp_path, {
        "osk/__init__.py": "",
        "osk/surfaces/__init__.py": "",
        "osk/surfaces/cli.py": "from osk import __version__\nfrom osk.hooks.main import run\n"
                               "from osk.errors import OskError\n",
        "osk/surfaces/commands/log.py": "def run():\n    from osk.authority import audit\n"
                                        "    from osk.engine.core import Engine\n"
                                        "    from osk.hooks.main import run\n",
        "osk/surfaces/server.py": "import importlib\nimportlib.import_module('osk.store.vault')\n",
    })
    assert around_the_engine(root) == [
        "osk.surfaces.commands.log:2 imports osk.authority.audit",
        "osk.surfaces.commands.log:4 imports osk.hooks.main.run",
        "osk.surfaces.server:2 imports osk.store.vault",
    ]


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
