"""Where a node's claims come from and what is open about them: sessions and scope
routing, citation pairs bound to hashes and their recheck candidates, the candidate
lists of the session start, the per-scope memory note.
"""
