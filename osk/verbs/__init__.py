"""The verbs above the engine: what a person runs at a terminal (``exclusion``, ``redaction``,
``review``, ``usage``, ``validate``) and the imports (``importer``, ``host_memory``), each
through the engine or the wings, never through an agent's tools.
"""
