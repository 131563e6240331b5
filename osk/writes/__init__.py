"""The write path: ``write`` (create, update, re-cite under the one lock), where a node goes
(``placement``), what it may cite (``citations``), the recheck gate (``recheck_gate``) and
moves (``moves``). A process that only reads never imports it.
"""
