"""The read side of the engine room: a raw round or file (``raw_reads``), the vault at a past
date (``as_of``), the ``overview`` and ``recheck`` reports, and a fresh ``osk search`` answered
from the persisted index without opening the engine (``quick_search``). Knows nothing of the
write path.
"""
