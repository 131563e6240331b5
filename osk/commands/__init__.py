"""Command groups of the `osk` CLI. Each module defines ``register(subparsers)``."""
