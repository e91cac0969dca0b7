"""`hybridsync failover --to REGION`: the running `hybridsync up --regions ...` evacuates its home
Region (local/failover.py). The command hands the running app a request in its state folder
(`failover.json`), which its loop takes within 2 s, and prints each step as the app says it. With
`--deployed`, the deployed app's consumers move to the standby stack in REGION
(sync/deployed_failover.py)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hybridsync.cli.common import Commands

REQUEST = "failover.json"


def add_failover(cli: Commands) -> None:
    failover = cli.add(
        "failover",
        "evacuate the home Region of the app `hybridsync up --regions` runs, or with --deployed of the "
        "deployed app: its consumers move to another Region's replica, rows settle against it, the "
        "aggregates are rebuilt there once",
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
        "then run `hybridsync aggregates rebuild --deployed` once, in the new home)",
    )
    failover.add_argument(
        "--deployed",
        action="store_true",
        help="in AWS: from home's pipeline stack to the standby stack in REGION (`hybridsync standby`); "
        "safe to run again, it finishes a failover that stopped",
    )
    failover.add_argument("--home", help="--deployed: the home Region (default: cdk.json's `home_region`)")
    failover.add_argument("--prefix", help="--deployed: the stacks' prefix (default: cdk.json's `prefix`)")
    failover.add_argument("--state-dir", default=".local", help="the running app's state (default .local)")
    failover.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (default 600)")


def _failover(args: argparse.Namespace) -> int:
    from hybridsync.local import running

    if args.deployed:
        return _deployed(args)

    state, request = Path(args.state_dir), Path(args.state_dir) / REQUEST
    pid = running.owner(state)
    if pid is None:
        raise SystemExit(
            f"hybridsync failover: no app is running from {state}/: start it with `hybridsync up --regions "
            "HOME,REGION`, or fail the deployed app over with --deployed"
        )
    try:
        regions = json.loads((state / "status.json").read_text()).get("replication")
    except (OSError, ValueError):
        regions = None
    if not regions:
        raise SystemExit(f"hybridsync failover: the app running from {state}/ has no other Region: start it "
                         "with `hybridsync up --regions HOME,REGION`")  # fmt: skip
    _write(request, {"to": args.to, "live": not args.offline, "said": [], "pid": pid}, "cli")
    deadline, shown = time.monotonic() + args.timeout, 0
    try:
        while time.monotonic() < deadline:
            time.sleep(0.5)
            answer = json.loads(request.read_text())
            for line in answer["said"][shown:]:
                print(line, flush=True)
            shown = len(answer["said"])
            if "error" in answer:
                raise SystemExit(f"hybridsync failover: {answer['error']}")
            if "done" in answer:
                _done(answer["done"], state)
                return 0
            if running.owner(state) != pid:
                raise SystemExit(
                    f"hybridsync failover: the app stopped (its log: {state}/up.log, or its shell)"
                )
        raise SystemExit(f"hybridsync failover: no answer from the app in {args.timeout:.0f} s")
    finally:
        request.unlink(missing_ok=True)  # answered, or given up: never taken later


def _deployed(args: argparse.Namespace) -> int:
    """The deployed app's failover (sync/deployed_failover.py), its steps printed as they go."""
    from hybridsync.cli.common import cdk_context, project_prefix
    from hybridsync.cli.standby import save_standbys, standbys
    from hybridsync.model import config
    from hybridsync.runtime import aws
    from hybridsync.sync import deployed_failover as handover

    root = config.project_root() or Path.cwd()
    home = args.home or cdk_context(root).get("home_region")
    if not home:
        raise SystemExit("hybridsync failover --deployed: no home Region: --home us-east-1, or cdk.json's "
                         "context `home_region`")  # fmt: skip
    if args.to == home:
        raise SystemExit(f"hybridsync failover --deployed: {home} is home; fail over to a standby's Region")
    prefix, model, entries = args.prefix or project_prefix(), config.model(), standbys(root)
    tables = {n: t["name"] for n, t in entries.get(args.to, {}).get("tables", {}).items()}

    def clients(service: str, region: str) -> Any:
        if args.offline and region == home:  # a Region that may not answer: a few seconds, not minutes
            return aws.client(service, region=region, connect_timeout=5, read_timeout=10,
                              retries={"mode": "standard", "max_attempts": 2})  # fmt: skip
        return aws.client(service, region=region)

    try:
        writer = None
        if not cdk_context(root).get("existing_db_secret_arn"):  # the app's Aurora: a global database
            writer = handover.Writer.of(clients, args.to, f"{prefix}-standby-{args.to}-database")
        done = handover.failover(
            clients, home=home, prefix=prefix, to=args.to, standbys=entries,
            save=lambda entries: save_standbys(root, entries),
            probe=handover.probe_in(clients, model, tables, writer),
            rebuild=handover.rebuild_in(clients, model), live=not args.offline, writer=writer,
            say=lambda line: print(line, flush=True),
        )  # fmt: skip
    except handover.Refused as refused:
        raise SystemExit(f"hybridsync failover --deployed: {refused}") from None
    except Exception as failed:  # the steps done stay done: the command finishes them when run again
        raise SystemExit(f"hybridsync failover --deployed: {type(failed).__name__}: {failed}; run it again "
                         "to finish (every step is safe to repeat)") from None  # fmt: skip
    print(f"{args.to} consumes. Deploy as usual: cdk.json marks it active, so home's pipeline stays "
          "disabled and the standby enabled. Commit cdk.json.")  # fmt: skip
    if not done.fenced:
        standby = f"AWS_REGION={args.to} hybridsync %s --deployed {prefix}-standby-{args.to}"
        print(f"{home} is not fenced: its consumers resume when its Region recovers. As soon as it answers, "
              f"run this again; then, once its late writes have reached {args.to}: "
              f"{standby % 'reconcile --repair'}, and {standby % 'aggregates rebuild'}")  # fmt: skip
    return 0


def _done(done: dict[str, Any], state: Path) -> None:
    steps = ", ".join(
        f"{name} {done[key]:.1f} s"
        for name, key in (("fenced", "fenced_s"), ("replicated", "settled_s"), ("started", "started_s"),
                          ("rebuilt", "rebuilt_s"))
    )  # fmt: skip
    if done["rebuild_error"]:
        print(f"The aggregates are not rebuilt, and are not right until they are: {done['rebuild_error']}. "
              f"Run it again: source {state}/env && hybridsync aggregates rebuild --deployed")  # fmt: skip
    print(f"{done['target']} is home ({steps}; {done['rebuild'].get('written', 0):,} aggregates written). "
          f"{state}/env names its DynamoDB and the Lambda API now: source it again")  # fmt: skip
    if not done["live"] or not done["delivered"]:
        print(f"What {done['source']} took while cut off reaches {done['target']} when it rejoins, and flows "
              "on from there. Then wait about ten times the recent replication latency, and count its "
              f"aggregates once more (safe to repeat): source {state}/env && hybridsync aggregates rebuild "
              "--deployed (--deployed: inside the app's operations function, as deployed)")  # fmt: skip


def take(state: Path, running: list[Any], port: int | None, moved: Callable[[Any], None]) -> None:
    """In `hybridsync up`'s loop: a request of this `up` run (`running[0]`: the app running, the
    new one as soon as it runs), its steps and outcome written back for the command above. A
    failover stranded between the two apps stops `up` (SystemExit)."""
    from hybridsync.local.failover import Refused, Stranded, failover
    from hybridsync.model import config

    request = state / REQUEST
    try:
        asked = json.loads(request.read_text())
    except (OSError, ValueError):
        return
    if "done" in asked or "error" in asked:
        return
    if asked.get("pid") != os.getpid():  # another `up`'s, left behind
        request.unlink(missing_ok=True)
        return
    if not isinstance(asked.get("to"), str) or not isinstance(asked.get("live"), bool):
        _write(request, asked | {"error": "a request names `to` (a Region) and `live` (true or false)"}, "up")
        return
    asked.setdefault("said", [])

    def say(line: str) -> None:
        print(f"failover: {line}", flush=True)
        asked["said"].append(line)
        _write(request, asked, "up")
        _handing_over(state, asked)

    def started(app: Any) -> None:
        running[0] = app
        moved(app)
        _handing_over(state, asked, app)  # the new home's pipeline runs: its status, the rebuild to come

    try:
        _, done = failover(running[0], asked["to"], config.model(), live=asked["live"], http_port=port,
                           say=say, started=started)  # fmt: skip
    except Refused as refused:  # nothing stopped
        _write(request, asked | {"error": str(refused)}, "up")
        return
    except Stranded as stranded:
        _write(
            request,
            asked | {"error": f"{stranded}; hybridsync up stops (its data stays): start it again"},
            "up",
        )
        raise SystemExit(f"hybridsync up: {stranded}") from stranded
    _write(request, asked | {"done": done.as_json()}, "up")


def _handing_over(state: Path, asked: dict[str, Any], app: Any = None) -> None:
    """`hybridsync status` during a hand-over: the last status (the old app's, or `app`'s once it
    runs) and the failover's steps so far; the loop writes the next one when the hand-over ends."""
    path = state / "status.json"
    try:
        status = app.status() if app is not None else json.loads(path.read_text())
    except (OSError, ValueError):
        return
    _write(path, status | {"failover": {"to": asked["to"], "said": asked["said"]}}, "up")


def _write(path: Path, value: dict[str, Any], writer: str) -> None:
    staged = path.with_suffix(f".{writer}.tmp")  # the other side never reads half a file
    staged.write_text(json.dumps(value))
    staged.replace(path)
