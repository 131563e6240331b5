"""`osk setup HOST` and `osk doctor`: connect osk to an agent host, then check the connection."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from osk.hosts.hostsetup import HOSTS

if TYPE_CHECKING:
    from osk.hosts.doctor import Check


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    setup = sub.add_parser(
        "setup", help="register osk's MCP server, hooks and rules with an agent host",
        description="Register the osk MCP server, hooks and rules/steering file with HOST. "
                    "Shows the exact changes and asks before writing; existing settings are "
                    "kept byte for byte outside osk's own entries.",
    )
    setup.add_argument("host", choices=HOSTS)
    setup.add_argument("--project", metavar="DIR",
                       help="set up this project only, where the host supports it "
                            "(default: your user-level settings)")
    setup.add_argument("--remove", action="store_true", help="undo osk setup for this host")
    setup.add_argument("--yes", action="store_true",
                       help="apply without asking (for scripts)")
    setup.add_argument("--dry-run", action="store_true",
                       help="show the changes and write nothing")
    setup.set_defaults(handler=run_setup)

    doctor = sub.add_parser(
        "doctor", help="check the vault, host setup, MCP server and hooks end to end",
        description="Check that the vault is found and valid and that the MCP server starts "
                    "and lists its tools, then each host: whether osk is set up with it and, "
                    "when it is, that the server serves the messages the real host sends "
                    "(recorded from it) and that its dry-run hook succeeds. Ends with a "
                    "verdict line per host. A host osk is not set up with is information, not "
                    "a failure: exits 1 only when the vault, the server or a set-up host is "
                    "broken.",
    )
    doctor.add_argument("--project", metavar="DIR",
                        help="check the project-level setup of this project")
    doctor.add_argument("--host", action="append", choices=HOSTS,
                        help="check only this host (repeatable; default: every host)")
    doctor.set_defaults(handler=run_doctor)


# ---------------------------------------------------------------------------------------------
# osk setup
# ---------------------------------------------------------------------------------------------


def _project(value: str | None) -> Path | None:
    from osk.errors import SetupError

    if value is None:
        return None
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise SetupError(f"--project {value}: no such folder; nothing was changed")
    return path


def run_setup(args: argparse.Namespace) -> int:
    from osk.engine.vaults import open_vault
    from osk.errors import SetupError
    from osk.hosts import hostsetup

    project = _project(args.project)
    vault = None if args.remove else open_vault(args.vault).root
    ctx = hostsetup.default_context(vault, project)
    plan = hostsetup.plan(args.host, ctx, remove=args.remove)
    where = f"project {project}" if project else "your user settings"
    if plan.empty:
        state = "not set up" if args.remove else "already set up"
        print(f"osk is {state} for {args.host} in {where}: nothing to change.")
        return 0
    action = "remove osk from" if args.remove else "set up osk for"
    print(f"osk setup will {action} {args.host} in {where}:\n")
    sys.stdout.write(plan.diff())
    if args.dry_run:
        print("\nDry run: nothing was written.")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            raise SetupError(
                "osk setup asks before it changes files, and stdin is not a terminal: pass "
                "--yes to apply the changes shown above (or --dry-run to only show them). "
                "Nothing was changed."
            )
        reply = input(f"\nApply these changes to {len(plan.changes)} file(s)? [y/N] ")
        if reply.strip().lower() not in {"y", "yes"}:
            print("Nothing was changed.")
            return 1
    backup = hostsetup.apply(plan, ctx)
    print()
    for change in plan.changes:
        verb = ("created" if change.before is None else
                "removed" if change.after is None else "updated")
        print(f"{verb} {change.path}")
    if backup is not None:
        print(f"Previous versions are in {backup}")
    if not args.remove:
        print(plan.note)
    return 0


# ---------------------------------------------------------------------------------------------
# osk doctor
# ---------------------------------------------------------------------------------------------


def run_doctor(args: argparse.Namespace) -> int:
    from osk.hosts import doctor

    found = doctor.examine(args.vault, _project(args.project), args.host or list(HOSTS))
    for check in found.checks:
        _print_check(check)
    for report in found.reports:
        if report.checks:
            print()
            for check in report.checks:
                _print_check(check)
    if found.reports:
        print("\nHosts:")
        for report in found.reports:
            print(f"  {report.verdict()}")
    print()
    print("All checks passed." if not found.failed else f"{found.failed} check(s) failed.")
    return 1 if found.failed else 0


def _print_check(check: Check) -> None:
    mark = "ok  " if check.ok else "info" if check.ok is None else "FAIL"
    print(f"[{mark}] {check.name}: {check.detail}")
    if check.fix and check.ok is not True:
        print(f"       fix: {check.fix}")
