"""The person's say: protected regions and what readers are served, the audit log and
the one mutation lock, trust, tombstones, valid time.
"""
