"""The format on disk: the vault, its node files, catalog, ledgers, objects and the
primitives under them (time, ids, atomic files, locks). Imports no other wing.
"""
