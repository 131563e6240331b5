"""What pyproject.toml declares matches what osk is: its licence file, its runtime imports."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

# Distribution name -> the module it installs, where they differ.
_MODULE_OF = {"gitpython": "git", "pyyaml": "yaml", "rank-bm25": "rank_bm25"}


def _distribution(requirement: str) -> str:
    for stop in "<>=!~;[ ":
        requirement = requirement.split(stop)[0]
    return requirement.strip().lower()


def _top_level_imports() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "osk").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_named_licence_file_exists_and_is_not_empty():
    for name in PROJECT["license-files"]:
        assert (ROOT / name).read_text(encoding="utf-8").strip(), name


def test_every_runtime_dependency_is_imported_by_osk():
    imported = _top_level_imports()
    for requirement in PROJECT["dependencies"]:
        dist = _distribution(requirement)
        assert _MODULE_OF.get(dist, dist) in imported, (
            f"{dist} is a runtime dependency that osk never imports: move it to an extra")


def test_every_package_folder_ships_in_the_wheel():
    # setuptools lists the packages by hand: a folder left off is missing from a wheel, while
    # an editable install (the tests') still finds it.
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["packages"])
    folders = {".".join(init.parent.relative_to(ROOT).parts)
               for init in (ROOT / "osk").rglob("__init__.py")}
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
