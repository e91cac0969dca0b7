"""`hybridsync failover --to REGION`: the running `hybridsync up --regions ...` evacuates its home
Region (local/failover.py). The command hands the running app a request in its state folder
(`failover.json`), which its loop takes within 2 s, and prints each step as the app says it."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hybridsync.cli.common import Commands

REQUEST = "failover.json"


def add_failover(cli: Commands) -> None:
    failover = cli.add(
        "failover",
        "evacuate the home Region of the app `hybridsync up --regions` runs: its consumers move to "
        "another Region's replica, rows settle against it, the aggregates are rebuilt there once",
        "hybridsync failover --to us-west-2",
        _failover,
    )
    failover.add_argument(
        "--to", required=True, metavar="REGION", help="the replica Region that becomes home"
    )
    failover.add_argument(
        "--offline",
        action="store_true",
        help="home is cut off: do not wait for its writes to reach REGION (they flow on when it rejoins; "
        "then run `hybridsync aggregates rebuild --deployed` once)",
    )
    failover.add_argument("--state-dir", default=".local", help="the running app's state (default .local)")
    failover.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (default 600)")


def _failover(args: argparse.Namespace) -> int:
    from hybridsync.local import running

    state = Path(args.state_dir)
    if running.owner(state) is None:
        raise SystemExit(
            f"hybridsync failover: no app is running from {state}/: start it with "
            "`hybridsync up --regions HOME,REGION`; a deployed failover is not built yet (docs/operating.md)"
        )
    request = state / REQUEST
    _write(request, {"to": args.to, "live": not args.offline, "said": []})
    deadline, shown = time.monotonic() + args.timeout, 0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        answer = json.loads(request.read_text())
        for line in answer["said"][shown:]:
            print(line, flush=True)
        shown = len(answer["said"])
        if "error" in answer:
            raise SystemExit(f"hybridsync failover: {answer['error']}")
        if "done" in answer:
            _done(answer["done"])
            return 0
    raise SystemExit(f"hybridsync failover: no answer from the app in {args.timeout:.0f} s ({request})")


def _done(done: dict[str, Any]) -> None:
    steps = ", ".join(
        f"{name} {done[key]:.1f} s"
        for name, key in (
            ("fenced", "fenced_s"),
            ("replicated", "settled_s"),
            ("started", "started_s"),
            ("rebuilt", "rebuilt_s"),
        )
    )
    print(
        f"{done['target']} is home ({steps}; {done['rebuild'].get('written', 0):,} aggregates written). "
        f"`.local/env` names its DynamoDB now: source it again"
    )
    if done["rebuild_error"]:
        print(f"The aggregates are not rebuilt: {done['rebuild_error']}")
    if not done["live"]:
        print(
            f"When {done['source']} answers again and has replicated what it took (its ReplicationLatency "
            "back to normal), count its late writes once: hybridsync aggregates rebuild --deployed"
        )


def take(state: Path, app: Any, port: int | None, moved: Callable[[Any], None]) -> Any:
    """In `hybridsync up`'s loop: a waiting request run (the app it returns is the one running),
    its steps and outcome written back for the command above."""
    from hybridsync.local.failover import failover
    from hybridsync.model import config

    request = state / REQUEST
    try:
        asked = json.loads(request.read_text())
    except (OSError, ValueError):
        return app
    if "done" in asked or "error" in asked:
        return app

    def say(line: str) -> None:
        print(f"failover: {line}", flush=True)
        asked["said"].append(line)
        _write(request, asked)

    try:
        app, done = failover(app, asked["to"], config.model(), live=asked["live"], http_port=port, say=say)
    except ValueError as refused:  # before anything stopped
        _write(request, asked | {"error": str(refused)})
        return app
    moved(app)
    _write(request, asked | {"done": done.as_json()})
    return app


def _write(path: Path, value: dict[str, Any]) -> None:
    staged = path.with_suffix(".tmp")  # the other side never reads half a file
    staged.write_text(json.dumps(value))
    staged.replace(path)
