"""What the semantic channel holds in memory: freed pages given back to the system."""

from __future__ import annotations

import subprocess
import sys

import pytest

from osk.search import semantic

# In a fresh process: 40 MB of blocks the C allocator serves from its heap (100 KB each, under
# glibc's mmap threshold), all freed but the last (so the heap's top cannot shrink by itself);
# the anonymous resident memory before and after ``give_back_freed_memory``.
FREED_THEN_GIVEN_BACK = """
from osk.search.semantic import give_back_freed_memory

def anonymous_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))

blocks = [bytearray(100_000) for _ in range(400)]
for block in blocks:
    block[::4096] = b"x" * len(block[::4096])  # touch every page
last = blocks[-1]
del blocks
before = anonymous_kb()
give_back_freed_memory()
print(before, anonymous_kb())
"""


@pytest.mark.skipif(semantic._malloc_trim() is None, reason="glibc's malloc_trim only")
def test_pages_freed_by_the_allocator_are_given_back_to_the_system():
    shown = subprocess.run([sys.executable, "-c", FREED_THEN_GIVEN_BACK], check=True,
                           capture_output=True, text=True).stdout.split()
    before, after = map(int, shown)
    assert before - after >= 30_000, (before, after)  # of the 40 MB freed, in KB


def test_elsewhere_giving_back_is_a_no_op(monkeypatch: pytest.MonkeyPatch):
    semantic._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert semantic._malloc_trim() is None
        semantic.give_back_freed_memory()  # nothing to call: no error
    finally:
        semantic._malloc_trim.cache_clear()
