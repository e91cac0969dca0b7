"""Local Lambda functions: each invocation runs in a worker process (a "container") that loaded the
handler from the function's synthesized asset folder, with the function's resolved environment; the
function's timeout is enforced by killing the worker, as Lambda does, and the next invocation starts
a fresh one (a cold start). Reserved concurrency is honoured as Lambda does: an invocation beyond
it is throttled (TooManyRequestsException), 0 throttles every one; a pool of local containers
smaller than the reservation makes callers wait instead."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import selectors
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hybridsync.local.awslambda.zygote import FIXED_FDS, Forked, Zygote

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
MAX_CONTAINERS = 4  # concurrent invocations of one function before callers wait


def _fileno(log: IO[Any] | int) -> int:
    """The function's log as a file descriptor (subprocess.DEVNULL: /dev/null)."""
    if not isinstance(log, int):
        return log.fileno()
    return log if log >= 0 else _DEVNULL


_DEVNULL = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


class FunctionError(Exception):
    """The function failed (raised, or timed out): what Lambda reports as a function error."""

    def __init__(self, error_type: str, message: str, trace: list[str] | None = None):
        super().__init__(f"{error_type}: {message}")
        self.error_type, self.message, self.trace = error_type, message, trace or []


ZYGOTE = Zygote()  # forks the containers of every app in this process (zygote.py)


class _Container:
    def __init__(self, function: LocalFunction):
        arguments = [str(function.asset.resolve()), function.handler, function.name, str(function.memory_mb)]
        forked: tuple[Forked, int] | None = None
        if function.forked and ZYGOTE.takes(function.environment, function.asset):
            argv, log = [str(BOOTSTRAP), *arguments, str(FIXED_FDS)], _fileno(function.log)
            with contextlib.suppress(OSError):  # a zygote that cannot fork it: a fresh interpreter
                forked = ZYGOTE.spawn(argv, function.environment, function.asset, log)
        self.process: subprocess.Popen | Forked
        if forked is not None:
            self.process, read = forked
        else:  # started the classic way: a fresh interpreter
            read, write = os.pipe()
            self.process = subprocess.Popen(
                [sys.executable, str(BOOTSTRAP), *arguments, str(write)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=function.log, pass_fds=(write,),
                env=function.environment, text=True, cwd=function.asset,
            )  # fmt: skip
            os.close(write)
        self.answers: IO[str] = os.fdopen(read)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.answers, selectors.EVENT_READ)

    def invoke(self, event: Any, timeout_s: float) -> Any:
        assert self.process.stdin is not None
        deadline = time.time() + timeout_s
        request = {"event": event, "deadline": deadline, "request_id": str(uuid.uuid4())}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        if not self.selector.select(timeout=max(0.0, deadline - time.time())):
            self.kill()
            raise FunctionError("Sandbox.Timedout", f"Task timed out after {timeout_s:.2f} seconds")
        line = self.answers.readline()
        if not line:
            self.kill()
            code = self.process.poll()  # a forked container's status went to the zygote: -1
            status = f" ({code})" if code != -1 else ""
            raise FunctionError("Runtime.ExitError", f"the function's process exited{status}")
        answer = json.loads(line)
        if "error" in answer:
            error = answer["error"]
            raise FunctionError(error["errorType"], error["errorMessage"], error.get("stackTrace"))
        return answer["result"]

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()
        self.selector.close()
        self.answers.close()


@dataclass
class Stats:
    invocations: int = 0
    errors: int = 0
    last_error: str = ""
    cold_starts: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)  # e.g. TransactionCanceledException


@dataclass
class LocalFunction:
    name: str
    asset: Path
    handler: str
    environment: dict[str, str]
    timeout_s: float
    memory_mb: int
    log: IO[Any] | int = subprocess.DEVNULL
    stats: Stats = field(default_factory=Stats)
    reserved: int | None = None  # ReservedConcurrentExecutions (PutFunctionConcurrency changes it)
    metric: Callable[[str, float], None] = lambda name, value: None  # Lambda's counts (cloudwatch/)

    max_containers: int = MAX_CONTAINERS  # concurrent invocations (a sharded stream's app raises it)
    forked: bool = True  # containers forked from the zygote when it can (zygote.py), else fresh

    def __post_init__(self) -> None:
        self._idle: queue.LifoQueue[_Container] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._busy = 0
        self._free = threading.Condition(self._lock)
        self._containers: set[_Container] = set()  # every live one, busy or idle: close() ends them all

    def _container(self) -> _Container:
        while True:
            try:
                container = self._idle.get_nowait()
            except queue.Empty:
                break
            if container.alive():
                return container
        container = _Container(self)
        with self._lock:
            self.stats.cold_starts += 1
            self._containers = {c for c in self._containers if c.alive()} | {container}
        return container

    def throttled(self) -> FunctionError:
        self.metric("Throttles", 1)
        with self._lock:
            self.stats.errors_by_type["TooManyRequestsException"] = (
                self.stats.errors_by_type.get("TooManyRequestsException", 0) + 1
            )
        return FunctionError("TooManyRequestsException", "Rate Exceeded.")

    def invoke(self, event: Any) -> Any:
        """Invoke synchronously; raises FunctionError when the function fails, times out or is
        throttled (error type TooManyRequestsException)."""
        with self._free:  # at most max_containers at once (read at each call: it may be raised)
            refused = self.reserved is not None and self._busy >= self.reserved
            if not refused:
                self._free.wait_for(lambda: self._busy < self.max_containers)
                self._busy += 1
        if refused:
            raise self.throttled()
        started = time.monotonic()
        try:
            container = self._container()
            with self._lock:
                self.stats.invocations += 1
            self.metric("Invocations", 1)
            try:
                result = container.invoke(event, self.timeout_s)
                self.metric("Errors", 0)
            except FunctionError as error:
                self.metric("Errors", 1)
                with self._lock:
                    self.stats.errors += 1
                    self.stats.last_error = str(error)[:300]
                    kinds = self.stats.errors_by_type
                    kinds[error.error_type] = kinds.get(error.error_type, 0) + 1
                if container.alive():
                    self._idle.put(container)
                raise
            self._idle.put(container)
            return result
        finally:
            self.metric("Duration", (time.monotonic() - started) * 1000)
            with self._free:
                self._busy -= 1
                self._free.notify()

    def close(self) -> None:
        """End every container, a running invocation's too (a drain polling for minutes), as
        deleting a function ends its execution environments."""
        with self._lock:
            containers, self._containers = self._containers, set()
        for container in containers:
            if container.alive():
                container.process.kill()
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                return
