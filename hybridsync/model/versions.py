"""Item versions: a hybrid logical clock in epoch milliseconds.

A version grows on every write of a key, also across delete and re-create, so that comparing two
versions orders two images of one item without trusting delivery order.
"""

from __future__ import annotations

import threading
import time

_lock = threading.Lock()
_last_issued = 0  # this process never issues the same version twice (a delete then a re-create in one ms)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def next_version(previous: int | None = None, now: int | None = None) -> int:
    """The version for a new write: the wall clock, or one past the previous version if the
    clock has not moved past it (same millisecond, or a clock that stepped back); never one this
    process issued before."""
    global _last_issued
    floor = 0 if previous is None else int(previous) + 1
    if now is not None:  # a given clock: a pure function, for tests and replays
        return max(now, floor)
    with _lock:
        _last_issued = max(now_ms(), _last_issued + 1, floor)
        return _last_issued
