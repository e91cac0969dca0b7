"""One `hybridsync up` per state folder: the first writes its pid in `<state>/up.pid`; a second is
refused while that process lives, for it would rewrite the first's `postgres-tls`, `env` and
status under it. A pid file whose process is gone (a killed app, a reboot) is stale: taken over."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

PID_FILE = "up.pid"


class AlreadyRunning(Exception):
    def __init__(self, shown: str, pid: int):
        super().__init__(
            f"an app is already running from {shown} (pid {pid}): stop it first (Ctrl-C in its shell), or "
            "give this one another --state-dir"
        )
        self.pid = pid


def started(pid: int) -> str:
    """When `pid` started, in clock ticks since boot (/proc/<pid>/stat, field 22): with the pid, it
    names one process, not a later one given the same pid. Empty where there is no /proc (macOS)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces
    return "" if fields[0] == "Z" else fields[19]  # a zombie has ended


def alive(pid: int, start: str = "") -> bool:
    """Whether the process `pid` lives, and is the one that started at `start` (when known)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it lives
        return True
    now = started(pid)
    if Path("/proc/self/stat").exists() and not now:  # ended just now, or a zombie
        return False
    return not start or not now or start == now


def owner(state_dir: Path) -> int | None:
    """The live app's pid that holds `state_dir`, if any."""
    try:
        pid, _, start = (state_dir / PID_FILE).read_text().strip().partition(" ")
        return int(pid) if alive(int(pid), start) else None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def hold(state_dir: Path, shown: str | None = None) -> Iterator[None]:
    """The state folder, held by this process until the block ends; `AlreadyRunning` if a live app
    holds it. `shown`: how the message names the folder (as the user gave it)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / PID_FILE
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pid = owner(state_dir)
            if pid is not None:
                raise AlreadyRunning(shown or str(state_dir), pid) from None
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as out:
            out.write(f"{os.getpid()} {started(os.getpid())}\n")
        break
    else:  # two starts took the stale file over at once: the other one won
        pid = owner(state_dir)
        raise AlreadyRunning(shown or str(state_dir), pid or -1)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            if int(path.read_text().split()[0]) == os.getpid():
                path.unlink()
