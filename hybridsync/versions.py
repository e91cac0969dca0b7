"""Item versions: a hybrid logical clock in epoch milliseconds.

A version grows on every write of a key, also across delete and re-create, so that comparing two
versions orders two images of one item without trusting delivery order.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def next_version(previous: int | None = None, now: int | None = None) -> int:
    """The version for a new write: the wall clock, or one past the previous version if the
    clock has not moved past it (same millisecond, or a clock that stepped back)."""
    current = now_ms() if now is None else now
    return current if previous is None else max(current, int(previous) + 1)
