"""What an engine call takes, shares and hands back: a node write's request (``request``), the
context a session's reads and writes share (``context``), and the results a read returns to a
surface (``results``, with a body's ``outline``). The bottom of the engine room: the read side,
the write path and the engine import it; it imports only the wings below.
"""
