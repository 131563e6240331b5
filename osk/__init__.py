"""osk: a local-first memory vault for coding agents.

This module is imported by every hook, so it must stay free of heavy imports.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
