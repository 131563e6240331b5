"""Git sync across devices: the cycle, landing, status and daemon; git itself.
"""
