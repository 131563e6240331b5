"""The one engine (``core.Engine``): the object every surface calls, holding a session, its
freshness and the search index, and handing each call to the read side or the write path.
"""
