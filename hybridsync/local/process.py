"""`hybridsync up` as a process of its own, for what must kill it and start it again on the same
state (the restart test, `bench/chaos.py`); DynamoDB and PostgreSQL then live in processes of
their own too, so a SIGKILL takes only the app."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hybridsync.model import config


def tuned_assembly(source: Path, target: Path, **mapping_properties: Any) -> Path:
    """The assembly with every stream mapping's properties changed (e.g. `BatchSize=25`), as the
    matching `-c` context values would synthesize it: templates rewritten, assets linked."""
    target.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name.endswith(".template.json"):
            template = json.loads(entry.read_text())
            for resource in template["Resources"].values():
                if resource["Type"] == "AWS::Lambda::EventSourceMapping":
                    resource["Properties"].update(mapping_properties)
            (target / entry.name).write_text(json.dumps(template))
        else:
            (target / entry.name).symlink_to(entry.resolve())
    return target


class UpProcess:
    """`hybridsync up --no-synth` on an assembly and a state folder, with DynamoDB and PostgreSQL
    from `env` (DYNAMODB_ENDPOINT, DATABASE_URL)."""

    def __init__(
        self,
        assembly: Path,
        state: Path,
        env: dict[str, str],
        *,
        prefix: str,
        faults: str | None = None,
        cwd: Path | None = None,
        options: tuple[str, ...] = (),
    ):
        self.state, self.env, self.cwd = state, env, cwd  # cwd: the project's folder (its pyproject)
        self.command = [
            sys.executable,
            "-m",
            "hybridsync.cli",
            "up",
            "--assembly",
            str(assembly),
            "--no-synth",
            "--state-dir",
            str(state),
            "--prefix",
            prefix,
        ]
        if faults:
            self.command += ["--faults", faults]
        self.command += list(options)  # more of `up`'s options (`--alarm-period 2`, ...)
        self.process: subprocess.Popen | None = None
        self.lives = 0

    @property
    def status_file(self) -> Path:
        return self.state / "status.json"

    def start(self, timeout_s: float = 120) -> None:
        """Start it and wait until it serves (its first status file)."""
        self.status_file.unlink(missing_ok=True)  # a killed app leaves its last one behind
        log = (self.state / "up.log").open("a")
        self.process = subprocess.Popen(
            self.command,
            cwd=self.cwd or config.project_root() or Path.cwd(),
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout_s
        while not self.status_file.is_file():
            if self.process.poll() is not None:
                raise RuntimeError(f"hybridsync up ended: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"hybridsync up did not come up in {timeout_s:.0f} s: {self.log_tail()}")
            time.sleep(0.5)
        self.lives += 1

    def start_until_up(self, attempts: int = 30, pause_s: float = 2) -> int:
        """Start it again until it comes up, as a supervisor would (it cannot start while
        PostgreSQL is down, for one); returns the attempts that failed."""
        for failures in range(attempts):
            try:
                self.start()
                return failures
            except RuntimeError:
                if failures == attempts - 1:
                    raise
                time.sleep(pause_s)
        return attempts

    def kill(self) -> None:
        """SIGKILL: no goodbye, whatever it was doing."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=90)

    def status(self, fresh_s: float = 10) -> dict[str, Any] | None:
        """Its status file, unless older than `fresh_s` (an app that is not running)."""
        try:
            status = json.loads(self.status_file.read_text())
        except (OSError, ValueError):
            return None
        return status if time.time() - status["at"] < fresh_s else None

    def cli(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
        """`hybridsync <args>` in a shell that sourced the app's `env`, as its README says, from the
        project's folder and with the environment the app was started with."""
        line = f"source {shlex.quote(str(self.state / 'env'))} && exec {sys.executable} -m hybridsync.cli "
        line += " ".join(shlex.quote(a) for a in args)
        return subprocess.run(["bash", "-c", line], cwd=self.cwd or config.project_root() or Path.cwd(),
                              env=self.env, capture_output=True, text=True, timeout=timeout_s)  # fmt: skip

    def environment(self) -> dict[str, str]:
        """What it exported in `<state>/env` (table, bucket and queue names...)."""
        out = {}
        for line in (self.state / "env").read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            out[name] = shlex.split(value)[0] if value else ""
        return out

    def pids(self) -> list[int]:
        """The app's process and its descendants (the function workers)."""
        if self.process is None or self.process.poll() is not None:
            return []
        found, queue = [], [self.process.pid]
        while queue:
            pid = queue.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    queue += [int(c) for c in (task / "children").read_text().split()]
                except OSError:
                    continue
        return found

    def log_tail(self, chars: int = 3000) -> str:
        return (self.state / "up.log").read_text(errors="replace")[-chars:]


def rss_mb(pids: list[int]) -> float:
    """Resident memory of these processes together, in MB."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
    return round(total / 1024, 1)
