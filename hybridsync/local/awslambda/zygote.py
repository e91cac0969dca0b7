"""A fork server for the local Lambda containers: one process per app that imported, once, the
third-party libraries every function loads (botocore, SQLAlchemy, psycopg), and forks a container
from that state on request. A container is still a process of its own, with its function's
environment, its asset first on its path and its own init (the handler's import, hybridsync's and the
project's modules, Powertools, the X-Ray SDK): only the libraries' import is done once, not per cold
start: a write-back container's start fell from ~0.5 to ~0.16 CPU-s (bench/cold_start.py); the
suite starts hundreds.

Run as `python zygote.py <socket fd>`, by `Zygote` below, with the environment a function has before
its own variables (PATH, HOME): a fresh interpreter's start-up, as `python bootstrap.py` has. A request
is a JSON object (argv, environment, working folder), length-prefixed, with three file descriptors
(stdin, stderr, the answers pipe); the answer, the container's pid and a pidfd of it.

What AWS has no counterpart of is only the time saved: Lambda imports every library in every cold
start. A library that reads the environment while it is imported would keep the zygote's value;
`READ_AT_IMPORT` names what the preloaded ones read (tests/integration/test_zygote.py records it), and
a function whose environment sets any of them starts the classic way. Not covered: what a `.pth`
file of the environment reads at start-up (none of the project's does), and reads made in C."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PRELOAD = (
    "boto3",
    "boto3.dynamodb.conditions",
    "boto3.dynamodb.types",
    "botocore.client",
    "botocore.credentials",
    "botocore.endpoint",
    "botocore.httpsession",
    "botocore.parsers",
    "botocore.serialize",
    "botocore.session",
    "dateutil.tz",
    "psycopg",
    "sqlalchemy",
    "sqlalchemy.dialects.postgresql.psycopg",
)
# The environment variables the preloaded modules read while they are imported, as recorded (see the
# module's doc; BOTO_DISABLE_CRT only where awscrt is installed)
READ_AT_IMPORT = frozenset({
    "BOTO_DISABLE_CRT", "PSYCOPG_IMPL", "PSYCOPG_WAIT_FUNC", "PYTHONTZPATH", "PYTHONUSERBASE",
    "_PYTHON_PROJECT_BASE", "_PYTHON_SYSCONFIGDATA_NAME",
})  # fmt: skip
READ_AT_START = ("PYTHON", "LC_", "LANG")  # prefixes: the interpreter's own flags, its locale
BASE_ENVIRONMENT = ("PATH", "HOME")  # what a function's environment holds besides its own
FIXED_FDS = 3  # the answers pipe is the container's file descriptor 3 (`bootstrap.py ... 3`)


def base_environment() -> dict[str, str]:
    """The part of a function's environment that is not its own: this process's PATH and HOME."""
    return {name: os.environ[name] for name in BASE_ENVIRONMENT if name in os.environ}


def _send(channel: socket.socket, data: bytes, fds: tuple[int, ...] = ()) -> None:
    """A message: its length (8 bytes) with the file descriptors, then its bytes."""
    socket.send_fds(channel, [len(data).to_bytes(8, "big")], fds)
    channel.sendall(data)


def _receive(channel: socket.socket, max_fds: int) -> tuple[bytes, list[int]]:
    """A message `_send` sent, and its file descriptors (b"" when the other end is gone)."""
    header, fds, _flags, _addr = socket.recv_fds(channel, 8, max_fds)
    data = header
    while len(data) < 8 or len(data) < 8 + int.from_bytes(data[:8], "big"):
        chunk = channel.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            return b"", []
        data += chunk
    return data[8:], fds


def _serve(channel: socket.socket) -> None:  # the zygote's loop
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the app stops its containers
    signal.signal(signal.SIGCHLD, _reap)
    for name in PRELOAD:
        __import__(name)
    # what the interpreter added to its environment as it started (PEP 538's LC_CTYPE, in the C
    # locale): a fresh container's interpreter adds the same to its function's
    started_with = {k: v for k, v in os.environ.items() if k not in BASE_ENVIRONMENT}
    loaded = sorted({name.partition(".")[0] for name in sys.modules})
    _send(channel, json.dumps(loaded).encode())  # what an asset must not ship a copy of
    while True:
        try:
            data, fds = _receive(channel, 3)
        except OSError:
            return
        if not data:
            return  # the app is gone
        # no reaping between the fork and the pidfd: it must name this process, however soon it ends
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            request = json.loads(data)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except Exception as error:  # a request it cannot serve: the app starts that one fresh
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            print(f"local Lambda zygote: {error!r}", file=sys.stderr, flush=True)
            for fd in fds:
                os.close(fd)
            _send(channel, b"0")
            continue
        if pid == 0:
            channel.close()
            try:
                _become_container(request, fds, started_with)  # ends the process
            finally:
                os._exit(1)  # never back into the zygote's loop
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        _send(channel, str(pid).encode(), (pidfd,))
        os.close(pidfd)


def _reap(*_: Any) -> None:
    """SIGCHLD: the containers that ended are reaped at once (their pidfds stay readable)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _become_container(request: dict[str, Any], fds: list[int], started_with: dict[str, str]) -> None:
    stdin, stderr, answers = fds  # numbered from 3 up: the zygote's 0-2 are open, so dup2 is safe
    os.dup2(stdin, 0)
    os.dup2(stderr, 2)
    os.dup2(answers, FIXED_FDS)
    for fd in fds:
        if fd not in (0, 2, FIXED_FDS):
            os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # as a fresh process has it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    os.environ.clear()
    os.environ.update(request["environment"] | started_with)
    time.tzset()  # TZ, as a fresh process reads it
    os.chdir(request["cwd"])
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's own stdin)
    sys.argv = request["argv"]
    code = 0
    try:
        import runpy

        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exit:
        if exit.code is not None and not isinstance(exit.code, int):
            print(exit.code, file=sys.stderr)
        code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:  # the interpreter's end, as a fresh one ends: its threads joined, its exit functions run
        import atexit

        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Forked:
    """A container forked by the zygote: what `subprocess.Popen` offers that the app uses (stdin,
    poll, kill, wait), on the pidfd the zygote opened, since the container is its child and not the
    app's. Its exit status went to the zygote: `returncode` is -1 once it ended."""

    def __init__(self, pid: int, pidfd: int, stdin: Any):
        self.pid, self.pidfd, self.stdin = pid, pidfd, stdin
        self.returncode: int | None = None
        self._lock = threading.Lock()  # any invoking thread may poll or kill it (as Popen locks)

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None and select.select([self.pidfd], [], [], 0)[0]:
                self.returncode = -1
                os.close(self.pidfd)
            return self.returncode

    def kill(self) -> None:
        with self._lock:
            if self.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        with self._lock:
            ended = self.returncode is not None or select.select([self.pidfd], [], [], timeout)[0]
        if not ended:
            raise subprocess.TimeoutExpired(f"container {self.pid}", timeout or 0)
        return self.poll()  # type: ignore[return-value]


class Zygote:
    """The app's side: starts the zygote on first use, and forks containers from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channel: socket.socket | None = None
        self._process: subprocess.Popen | None = None
        self._base: dict[str, str] = {}  # the zygote's environment when it started
        self._loaded: set[str] = set()  # its top-level modules
        self._assets: dict[Path, set[str]] = {}  # what each asset ships at its top

    def takes(self, environment: dict[str, str], asset: Path) -> bool:
        """Whether a function can be forked: its environment sets nothing the preloaded libraries
        read at their import and has the zygote's base, and its asset ships no copy of a module the
        zygote loaded (a fresh interpreter would import the asset's). False if no zygote starts."""
        with self._lock:
            if self._started() is None:
                return False
            shipped = self._assets.get(asset)
            if shipped is None:  # a package, a module, its bytecode or an extension: `name.*`
                shipped = self._assets[asset] = {p.name.partition(".")[0] for p in asset.iterdir()}
            base = self._base
        return (
            not shipped & self._loaded
            and not READ_AT_IMPORT & environment.keys()
            and not any(name.startswith(READ_AT_START) for name in environment)
            and all(environment.get(name) == base.get(name) for name in BASE_ENVIRONMENT)
        )

    def spawn(
        self, argv: list[str], environment: dict[str, str], cwd: Path, stderr: int
    ) -> tuple[Forked, int]:
        """A container running `argv` (bootstrap.py's, answering on FIXED_FDS), with its stderr on
        `stderr`; and the read end of its answers pipe. OSError if the zygote cannot fork it."""
        stdin_read, stdin_write = os.pipe()
        answers_read, answers_write = os.pipe()
        try:
            with self._lock:
                channel = self._started()
                if channel is None:
                    raise OSError("the local Lambda zygote did not start")
                request = json.dumps({"argv": argv, "environment": environment, "cwd": str(cwd.resolve())})
                _send(channel, request.encode(), (stdin_read, stderr, answers_write))
                pid, fds = _receive(channel, 1)
                if not pid:
                    self._stop()
                    raise OSError("the local Lambda zygote ended")
                if not fds:
                    raise OSError("the local Lambda zygote could not fork this container")
            return Forked(int(pid), fds[0], os.fdopen(stdin_write, "w")), answers_read
        except BaseException:
            os.close(stdin_write)
            os.close(answers_read)
            raise
        finally:
            os.close(stdin_read)
            os.close(answers_write)

    def _started(self) -> socket.socket | None:
        """The channel to a running zygote, started if need be (it answers with what it loaded)."""
        if self._channel is not None and self._process is not None and self._process.poll() is None:
            return self._channel
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._base = base_environment()
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=self._base, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            cwd="/",
        )  # fmt: skip
        theirs.close()
        self._channel = ours
        loaded, _ = _receive(ours, 0)
        if not loaded:
            self._stop()
            return None
        self._loaded = set(json.loads(loaded))
        return ours

    def _stop(self) -> None:
        if self._channel is not None:
            self._channel.close()  # the zygote reads the end of its channel and exits
        if self._process is not None:
            self._process.wait()
        self._channel = self._process = None

    def close(self) -> None:
        with self._lock:
            self._stop()


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
