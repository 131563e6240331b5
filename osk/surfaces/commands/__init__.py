"""Command groups of the `osk` CLI. Each module defines ``register(subparsers)``.

``GROUPS`` names every top-level command's group, in the order ``osk --help`` lists them, so a
run of one command imports and builds only its own group (``osk.surfaces.cli.build_parser``); a test
keeps it equal to what each group registers.
"""

GROUPS: dict[str, tuple[str, ...]] = {
    "vault": ("init",),
    "mcp": ("mcp",),
    "nodes": ("validate", "overview", "read"),
    "search": ("search", "embed", "reindex"),
    "import_": ("import",),  # a module may not be named after the keyword
    "recall": ("recall", "stats"),
    "authority": ("protect", "unprotect", "approve", "revert", "review", "log", "show",
                  "confirm", "reject", "tombstones", "lift", "candidates", "dismiss",
                  "evictions", "memory", "settle"),
    "redact": ("redact",),
    "exclude": ("exclude", "include", "exclusions"),
    "sync": ("sync",),
    "hosts": ("setup", "doctor"),
    "demo": ("quickstart",),
}


def group_of(command: str) -> str | None:
    """The group that registers ``command``; None for a name no group has."""
    return next((group for group, names in GROUPS.items() if command in names), None)
