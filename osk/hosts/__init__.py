"""`osk setup HOST`: which files each host gets, and edits of config files that keep
every other byte.
"""
