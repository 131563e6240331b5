"""The CLI surface: exit codes and the one place errors are mapped."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from osk.surfaces.cli import main


def test_init_creates_a_vault_and_says_how_to_use_it(tmp_path: Path, capsys):
    assert main(["init", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert out == (f"Created vault {tmp_path / 'v'}\n"
                   f"Use it with: export OSK_VAULT={tmp_path / 'v'}\n")


def test_an_osk_error_prints_one_error_line_and_returns_its_exit_code(tmp_path: Path, capsys):
    main(["init", str(tmp_path / "v")])
    capsys.readouterr()
    assert main(["init", str(tmp_path / "v")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"Error: {tmp_path / 'v'} is already an osk vault; nothing changed\n"


def test_version_and_python_dash_m_work(tmp_path: Path):
    from osk import __version__

    result = subprocess.run([sys.executable, "-m", "osk", "--version"], capture_output=True,
                            text=True, check=True)
    assert result.stdout == f"osk {__version__}\n"


@pytest.mark.parametrize("command", ["validate", "search"])
def test_commands_that_need_a_vault_say_how_to_find_one(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    monkeypatch.chdir(tmp_path)
    args = [command] + (["query"] if command == "search" else [])
    assert main(args) == 2
    assert "no osk vault found" in capsys.readouterr().err


def test_each_command_group_registers_exactly_the_commands_the_cli_table_names():
    import importlib

    from osk.surfaces.cli import build_parser
    from osk.surfaces.commands import GROUPS

    for group, names in GROUPS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"osk.surfaces.commands.{group}").register(sub)
        assert tuple(sub.choices) == names, group
    listed = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(listed.choices) == tuple(n for names in GROUPS.values() for n in names)


@pytest.mark.parametrize(("argv", "command"), [
    (["search", "x"], "search"), (["--vault", "search", "read", "x"], "read"),
    (["--vault=/v", "--version", "log"], "log"), (["--help"], None), ([], None),
    (["--vau", "/v", "search"], None)])
def test_a_run_builds_the_parser_of_its_own_command_group_only(argv, command):
    from osk.surfaces.cli import _command_named, build_parser
    from osk.surfaces.commands import GROUPS, group_of

    assert _command_named(argv) == command
    if command is not None:
        parser = build_parser(command)
        listed = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        alone = command == "search"  # its group registers each command on its own
        assert tuple(listed.choices) == ((command,) if alone else GROUPS[group_of(command) or ""])


PLAIN_SEARCHES = [
    ["search", "walrus"], ["--vault", "/v", "search", "walrus seal", "--json"],
    ["--vault=/v", "search", "x", "--k", "3", "--kind", "rounds", "--scope", "atlas"],
    ["search", "--json", "--as-of", "2026-03-01", "x"], ["search", "", "--k", "007"],
    ["--vault=", "search", "search"], ["search", "x", "--semantic", "--kind", "nodes"],
]
NOT_PLAIN = [
    ["search"], ["search", "a", "b"], ["search", "-x"], ["search", "x", "--js"],
    ["search", "x", "--k", "-1"], ["search", "x", "--k", "three"], ["search", "x", "--k"],
    ["search", "x", "--k", "\u00b2"], ["search", "x", "--k", "1_0"],
    ["search", "x", "--kind", "both"], ["search", "x", "--json", "--json"],
    ["search", "x", "--k=3"], ["search", "x", "--help"], ["--vault", "-v", "search", "x"],
    ["--version", "search", "x"], ["read", "x"], ["search", "x", "--scope", "--json"],
    ["search", "--", "x"], ["search", "x", "--semantic", "--semantic"],
]


@pytest.mark.parametrize("argv", PLAIN_SEARCHES)
def test_a_plain_search_is_read_without_argparse_as_argparse_reads_it(argv):
    from osk.surfaces.cli import build_parser
    from osk.surfaces.commands.search import plain_search

    plain = plain_search(argv)
    assert plain is not None
    assert vars(plain) == vars(build_parser("search").parse_args(argv))


@pytest.mark.parametrize("argv", NOT_PLAIN)
def test_anything_but_a_plain_search_goes_to_argparse(argv):
    from osk.surfaces.commands.search import plain_search

    assert plain_search(argv) is None


def test_the_plain_search_reader_knows_every_option_osk_search_registers():
    from osk.surfaces.cli import build_parser
    from osk.surfaces.commands.search import FLAGS, VALUED

    parser = build_parser("search")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    registered = {option: action.dest for action in sub.choices["search"]._actions
                  for option in action.option_strings if option not in ("-h", "--help")}
    assert registered == {**VALUED, **FLAGS}


@pytest.mark.parametrize(("argv", "frozen"), [
    (["search", "walrus", "--json"], True), (["search", "walrus", "--js"], False)])
def test_a_plain_search_leaves_the_collector_nothing_to_do_at_exit(tmp_path: Path, argv, frozen):
    """What is alive as a plain search's process ends is frozen (``gc.freeze`` at exit, after
    every handler registered later), so the exit's collection passes over none of it; an
    argparse run (here an abbreviated option) is left as it was."""
    from osk.store.vault import init

    vault = init(tmp_path / "v")
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        "from osk.surfaces.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    done = subprocess.run([sys.executable, "-c", code, "--vault", str(vault.root), *argv],
                          capture_output=True, text=True, encoding="utf-8", check=True)
    assert done.stdout.splitlines()[-1] == f"frozen {frozen}"


def test_a_hook_process_runs_without_the_collector_and_leaves_it_nothing_at_exit(
        tmp_path: Path):
    """A hook runs on every turn: the cycle collector is paused while it runs (it makes no
    cycles worth a pass) and what is alive as its process ends is frozen, and it still
    answers (a session start prints its block)."""
    from osk.store.vault import init

    vault = init(tmp_path / "v")
    code = (
        "import atexit, gc, sys\n"
        "passes = []\n"
        "gc.callbacks.append(lambda phase, info: passes.append(phase) if phase == 'start' "
        "else None)\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        "from osk.surfaces.cli import main\n"
        "before = len(passes)\n"
        "main(sys.argv[1:])\n"
        "print('passes', len(passes) - before)\n"
    )
    payload = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "hook_event_name":
                          "SessionStart", "source": "startup"})
    done = subprocess.run([sys.executable, "-c", code, "hook", "session-start", "--host", "claude",
                           "--vault", str(vault.root)], input=payload, capture_output=True,
                          text=True, encoding="utf-8", check=True)
    block, _, tail = done.stdout.rpartition("passes ")
    assert tail.split() == ["0", "frozen", "True"], done.stdout + done.stderr
    assert json.loads(block)["hookSpecificOutput"]["hookEventName"] == "SessionStart"


def test_json_printed_in_pieces_is_the_json_text_and_draws_an_iterator_as_a_list():
    """``print_json`` (``osk import --json``: its created nodes drawn as written) writes what
    ``json_text`` gives, plus a line end: nesting, empty containers, dataclasses, paths,
    non-ASCII text, numbers and the literals alike."""
    import io
    from dataclasses import dataclass

    from osk.surfaces.commands.common import json_text, print_json

    @dataclass
    class Hit:
        title: str
        where: Path
        parts: tuple[int, ...]
        _private: int = 0

    values: list[object] = [
        {}, [], "Café \"quoted\"\n", 3, 2.5, None, True,
        {"a": [], "b": {}, "c": [[], [{}], [[1, -0.5]]], 7: {"d": set()}},
        {"hits": [Hit("Ünïcode", Path("/x/y"), (1, 2)), Hit("two", Path("z"), ())]},
    ]
    for value in values:
        out = io.StringIO()
        print_json(value, out)
        assert out.getvalue() == json_text(value) + "\n"
    drawn = []

    def created():
        for n in range(3):
            drawn.append(n)
            yield {"line": n, "title": f"T{n}"}

    out = io.StringIO()
    print_json({"created": created(), "hubs": []}, out)
    assert drawn == [0, 1, 2]
    assert out.getvalue() == json_text(
        {"created": [{"line": n, "title": f"T{n}"} for n in range(3)], "hubs": []}) + "\n"
    assert json.loads(out.getvalue())["created"][2] == {"line": 2, "title": "T2"}
