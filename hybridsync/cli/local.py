"""The local app: write a project (`init`), run it (`up`), watch it (`status`), invoke one function."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybridsync.cli import common, failover
from hybridsync.cli.common import Commands
from hybridsync.model import config
from hybridsync.sql import migrations

if TYPE_CHECKING:
    from hybridsync.local.console.server import Console


def add_init(cli: Commands) -> None:
    init = cli.add(
        "init",
        "write a working hybridsync project into an empty folder: its model (one "
        "DynamoDB-mastered entity, one PostgreSQL-mastered, one ranked aggregate), first "
        "migration, seed, tests, cdk.json",
        "hybridsync init myapp && cd myapp && hybridsync up --seed --once",
        _init,
    )
    init.add_argument("directory", help="an empty (or new) folder")
    init.add_argument("--package", help="the Python package to write (default: the folder's name)")


def _init(args: argparse.Namespace) -> int:
    from hybridsync.cli import scaffold

    try:
        written = scaffold.write(Path(args.directory), args.package)
    except scaffold.Refused as refused:
        raise SystemExit(str(refused)) from None
    for path in written:
        print(f"  wrote {path}")
    print(
        f"\na hybridsync project in {args.directory}/. Next:\n  cd {args.directory}\n"
        "  hybridsync up --seed --once      # the app locally: seed data, then drift and aggregates checked\n"
        "  python -m pytest                 # the contract suite, over your entities and aggregates\n"
        "  npm install && npx cdk synth     # the CloudFormation of it all (app.py builds it)"
    )
    return 0


def add_up(cli: Commands) -> None:
    up = cli.add(
        "up",
        "run the synthesized app locally: tables, functions, stream mappings, HTTP API, schedules",
        "hybridsync up --seed --once   (or, in this repository: hybridsync up --demo)",
        _up,
    )
    up.add_argument(
        "--once",
        action="store_true",
        help="set everything up, print (run the seed or demo, exit 1 if it went wrong), and stop",
    )
    workload = up.add_mutually_exclusive_group()
    workload.add_argument(
        "--seed",
        action="store_true",
        help="write the project's seed data ([tool.hybridsync] seed) through the real write "
        "paths, then check drift and the aggregates against a recount",
    )
    workload.add_argument(
        "--demo",
        action="store_true",
        help="drive the project's demo workload ([tool.hybridsync] demo), then report "
        "(also .local/report.html)",
    )
    up.add_argument("--port", type=int, default=0, help="HTTP API port on 127.0.0.1 (default: a free one)")
    up.add_argument("--console-port", type=int, default=0, metavar="PORT",
                    help="the live console's port on 127.0.0.1 (default: a free one)")  # fmt: skip
    up.add_argument("--no-console", action="store_true", help="no live console")
    up.add_argument(
        "--faults",
        type=_fault_plan,
        default=None,
        metavar="PLAN",
        help="inject faults into stream deliveries, seeded: e.g. "
        "duplicate=0.2,fail_before=0.05,fail_after=0.05,conflict=0.5,seed=7 (a Kinesis-sourced "
        "table's changes also: duplicate_put=0.1,reorder=0.1)",
    )
    up.add_argument(
        "--shards",
        type=common.positive(int),
        default=1,
        help="stream shards per table, by partition-key hash, as production has them (default 1: "
        "DynamoDB Local's own); e.g. --shards 4 --shard-lifetime 20",
    )
    up.add_argument(
        "--shard-lifetime",
        type=common.positive(float),
        metavar="S",
        help="seal every shard after S seconds and continue it in a child (AWS: about 4 hours)",
    )
    up.add_argument(
        "--shard-records",
        type=common.positive(int),
        metavar="N",
        help="also seal a shard once it holds N records (a short run's rollover, whatever its speed)",
    )
    up.add_argument(
        "--retention",
        type=common.positive(float),
        metavar="S",
        help="trim stream records older than S seconds (AWS: 24 hours); readers behind it lose records",
    )
    up.add_argument(
        "--alarm-period",
        type=common.positive(int),
        metavar="S",
        help="evaluate every alarm over periods of S seconds instead of its own (5 minutes, 1 minute): "
        "see one go to ALARM and back to OK in seconds",
    )
    _region_options(up)
    up.add_argument(
        "--pg-max-connections",
        type=common.positive(int),
        metavar="N",
        help="the embedded PostgreSQL's max_connections (a small Aurora allows a few hundred)",
    )
    _state_option(up)
    _app_options(up)


def _region_options(up: argparse.ArgumentParser) -> None:
    up.add_argument(
        "--regions",
        type=_regions,
        metavar="HOME,REGION...",
        help="run the global tables' replica Regions too, each a DynamoDB Local, replicated as AWS "
        "does (asynchronous, last writer wins): e.g. --regions us-east-1,us-west-2 (home first)",
    )
    up.add_argument(
        "--replication-lag",
        type=common.positive(float),
        metavar="S",
        help="with --regions: replicate a write S seconds after it is read (default 0.3; AWS: "
        "typically within a second)",
    )
    up.add_argument(
        "--region-faults",
        type=_region_faults,
        metavar="PLAN",
        help="with --regions: cut a replica Region off, or stop its DynamoDB, at a time and for a while "
        "(seconds from the start): e.g. partition=us-west-2@10+5,stop=us-west-2@30+10",
    )


def _up(args: argparse.Namespace) -> int:
    from hybridsync.local import running

    started = time.monotonic()
    state = Path(args.state_dir)
    try:
        with running.hold(state, args.state_dir):  # a second app would rewrite the first's TLS and env
            return _run_up(args, state, started)
    except running.AlreadyRunning as refused:
        raise SystemExit(f"hybridsync up: {refused}") from None


def _ports_free(args: argparse.Namespace) -> None:
    for port, option in ((args.port, "--port"), (args.console_port, "--console-port")):
        _port_free(port, option)


def _port_free(port: int, option: str = "--port") -> None:
    """A port option, checked before anything starts: one line naming it if it is taken."""
    import socket

    if not port:
        return
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP API binds it
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise SystemExit(
                f"hybridsync up: {option} {port}: 127.0.0.1:{port} is not free ({error.strerror}; another "
                f"`hybridsync up`?): give another port, or leave {option} out and a free one is picked"
            ) from None


def _run_up(args: argparse.Namespace, state: Path, started: float) -> int:
    from hybridsync import local
    from hybridsync.local.app import LocalApp
    from hybridsync.local.template import Assembly, synth_if_stale

    config.hooks("routes")  # a routes module that cannot load would answer every request 500: say so now
    hook = "demo" if args.demo else "seed" if args.seed else None
    runs = config.hooks(hook) if hook else []
    if hook and not runs:  # said before anything starts, not after
        raise SystemExit(
            f'--{hook}: name a function in pyproject.toml ([tool.hybridsync] {hook} = "myapp.{hook}:run")'
        )
    _ports_free(args)
    if args.region_faults and not args.regions:
        raise SystemExit("hybridsync up: --region-faults cuts off or stops replica Regions: run them with "
                         "--regions HOME,REGION too")  # fmt: skip
    assembly = Assembly.load(synth_if_stale(Path(args.assembly), synth=not args.no_synth))
    with local.start(
        state, args.prefix, tables=False, keep_dynamodb=True, pg_max_connections=args.pg_max_connections
    ) as stack:
        try:
            app = LocalApp(
                assembly,
                **stack.endpoints(),
                state_dir=state,
                prefix=args.prefix,
                faults=args.faults,
                iam=not args.no_iam,
                shards=args.shards,
                shard_lifetime_s=args.shard_lifetime,
                shard_records=args.shard_records,
                retention_s=args.retention,
                alarm_period_s=args.alarm_period,
                regions=args.regions,
                replication_lag_s=args.replication_lag,
                region_faults=args.region_faults,
            )
        except ValueError as refused:  # --regions the app cannot have, said before anything runs
            raise SystemExit(f"hybridsync up: --regions: {refused}") from None
        status_file = state / "status.json"
        running, console = [app], None  # one app; after `hybridsync failover`, the one in the new home
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with Ctrl-C ignored
        try:
            app.start(http_port=args.port)
            stack.table_names = dict(app.table_names)
            stack.region = assembly.region  # the stacks' own Region, when they are pinned to one
            stack.bucket_names = {c.removesuffix("Bucket").lower(): name for c, name in app.buckets.items()}
            env_file = state / "env"
            _write_env(env_file, stack, app)
            console = _console(args, running, stack.database_url)
            took = time.monotonic() - started
            print(f"hybridsync: the app of {args.assembly}/ running locally, up in {took:.1f}s")
            _banner(stack, app, env_file, console)
            if runs:
                from rich.console import Console

                from hybridsync.local import report
                from hybridsync.runtime import db

                engine = db.create_engine(stack.database_url)
                if args.demo:
                    figures = runs[0](app, engine, state, Console())
                else:
                    figures = _seed(app, engine, runs[0], Console())
                engine.dispose()
                if args.once:
                    return 0 if report.good(figures) else 1
            if args.once:
                return 0
            print("Ctrl-C stops everything (PostgreSQL data, stream positions stay in .local/).", flush=True)
            _serve(running, state, args.port, lambda moved: _write_env(env_file, stack, moved))
        except KeyboardInterrupt:
            print("stopping: delivering what was read, then stopping the functions")
        finally:
            if console is not None and not isinstance(console, str):
                console.close()
            running[0].stop()  # its functions first (a drain polling), then PostgreSQL goes away
            status_file.unlink(missing_ok=True)
    return 0


def _console(args: argparse.Namespace, running: list[Any], database_url: str) -> Console | str | None:
    """The live console on the running app (after a failover, the new home's), or why it is not."""
    from hybridsync.local.console.scripts import Unavailable
    from hybridsync.local.console.server import Console
    from hybridsync.runtime import db

    if args.no_console:
        return None
    try:
        console = Console(lambda: running[0], db.create_engine(database_url), config.model(),
                          port=args.console_port)  # fmt: skip
    except (Unavailable, OSError) as why:  # no npm, offline, the port taken, the cache not writable
        return f"not started: {why}"
    console.start()
    return console


def _serve(running: list[Any], state: Path, port: int, moved: Callable[[Any], None]) -> None:
    """Until Ctrl-C: the status file every 2 s, and a `hybridsync failover` when one is asked (the
    app in `running` replaced by the one it starts)."""
    status_file = state / "status.json"
    (state / failover.REQUEST).unlink(missing_ok=True)  # a request is this run's, never an earlier one's
    while True:
        staged = status_file.with_suffix(".tmp")  # `hybridsync status` never reads half a file
        staged.write_text(json.dumps(running[0].status(), indent=1))
        staged.replace(status_file)
        time.sleep(2)
        if running[0].replicator is not None:
            failover.take(state, running, port, moved)


def _write_env(env_file: Path, stack: Any, app: Any) -> None:
    """`.local/env`: what other shells, the hybridsync commands and plain boto3 need to reach the app."""
    from hybridsync import local

    env = stack.environment() | app.failure_environment()
    env["DYNAMODB_ENDPOINT"] = app.dynamodb_endpoint  # home's: another Region's after a failover
    if app.streams_server is not None:
        env["DYNAMODB_STREAMS_ENDPOINT"] = app.streams_server.endpoint
    env |= app.operator_environment()
    if app.replicator is not None:  # each Region's DynamoDB: DYNAMODB_ENDPOINT_US_WEST_2
        env |= app.replicator.environment()
    if app.http is not None:  # the HTTP API, as the api stack's output ApiUrl names it deployed
        env["API_URL"] = f"http://127.0.0.1:{app.http.server_address[1]}"
    env |= local.plain_boto3(env)
    env_file.write_text("".join(f"export {k}={v!r}\n" for k, v in env.items()))


def _seed(app: Any, engine: Any, seed: Callable[..., Any], console: Any) -> dict[str, Any]:
    """`up --seed`: the project's seed writes through the real write paths (`seed(app, engine)`),
    then, once the pipeline caught up: drift both ways and the aggregates against a recount."""
    from hybridsync import workloads
    from hybridsync.local import report

    started = time.time()
    with console.status("seeding..."):
        written = seed(app, engine) or 0
    with console.status("the pipeline is catching up...") as status:
        caught_up = workloads.wait_caught_up(
            lambda: app.status()["mappings"],
            engine,
            timeout_s=300,
            progress=lambda lag: status.update(f"catching up: {lag}"),
        )
    figures = report.figures(
        app,
        engine,
        config.model(),
        started=started,
        elapsed=time.time() - started,
        writes=int(written),
        caught_up=caught_up,
    )
    report.show(console, figures)
    return figures


def _regions(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _region_faults(text: str) -> Any:
    from hybridsync.local.dynamodb.replication import RegionFault

    try:
        return RegionFault.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _fault_plan(text: str) -> Any:
    from hybridsync.local.faults import FaultPlan

    try:
        return FaultPlan.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _kinesis_source(arn: str) -> str:
    """A Kinesis mapping's source as the banner names it: the stream, and its fan-out consumer."""
    from hybridsync.local.kinesis.models import stream_name

    if ":kinesis:" not in arn:
        return ""
    consumer = arn.split("/consumer/", 1)[1].split(":")[0] if "/consumer/" in arn else ""
    return f"on Kinesis {stream_name(arn)}" + (f" through fan-out consumer {consumer}" if consumer else "")


def _banner(stack: Any, app: Any, env_file: Path, console: Console | str | None = None) -> None:
    """What `hybridsync up` prints once the app runs: each service, resource and endpoint."""
    _banner_services(stack, app)
    _banner_tables_and_functions(app)
    _banner_mappings(app)
    if app.http is not None:
        print(
            f"  HTTP API   http://127.0.0.1:{app.http.server_address[1]}/  (callers' IAM authorization is "
            "not checked locally)"
        )
    if isinstance(console, str):
        print(f"  console    {console}")
    elif console is not None:
        print(f"  console    {console.url}  (live, in a browser: the app as a diagram, throughput, dead "
              "letters and their redrive, alarms, drift, the trace of any change)")  # fmt: skip
    if app.lambda_api is not None:
        print(f"  Lambda API {app.lambda_api.endpoint}  (invoke, pause a mapping: what `--deployed` calls)")
    for name in app.queues:
        print(f"  queue      {name} (scheduled runs that failed past their retries)")
    for name in app.buckets.values():
        kept = ": failed batches, records included (`hybridsync failed-batches`)"
        print(f"  bucket     {name} (S3 on moto server){kept if name == app.failed_batches_bucket else ''}")
    if app.alarms is not None:
        print(f"  alarms     {len(app.alarms.alarms)} evaluated locally: `hybridsync status`; "
              f"notifications in {app.state_dir / 'notifications'}/")  # fmt: skip
    if app.custom_resources:
        print(f"  deploy     ran {', '.join(app.custom_resources)} (custom resources, as a deploy does)")
    from hybridsync.dynamodb import timeseries

    for series in config.model().time_series:
        days = sorted(timeseries.tables(app.client, app.prefix, series))
        print(
            f"  series     {app.prefix}-{series.table.name}-<day>: {', '.join(days) or 'none yet'} "
            "(a table per day, rotated by the Rotate function)"
        )
    if app.replicator is not None:
        _banner_regions(app.replicator)
    if app.region_faults:
        shown = ", ".join(f"{f.kind} {f.region} at {f.at_s:g}s for {f.for_s:g}s" for f in app.region_faults)
        print(f"  faults     {shown} (Region faults; `hybridsync status` counts them)")
    if app.faults:
        print(f"  faults     {app.faults.plan} injected into stream deliveries")
    _drain_line(app)
    if app.streams_server is not None:
        print(f"  streams    {app.streams_server.endpoint}  (the app's DynamoDB Streams API, for any reader)")
    print(f"  env        source {env_file}  (for other shells, the hybridsync commands, plain boto3 and the "
          "AWS CLI); `hybridsync status` for lag and the outbox")  # fmt: skip


def _banner_regions(replicator: Any) -> None:
    """Each Region of the global tables' twin, and what it replicates."""
    home, *others = replicator.regions.values()
    print(f"  region     {home.name}  home: the app's DynamoDB above, its consumers, PostgreSQL's writer")
    for region in others:
        tables = [table for table, names in replicator.tables.items() if region.name in names]
        print(f"  region     {region.name}  {region.endpoint}  (DynamoDB Local: {', '.join(tables)}; "
              f"last writer wins, replicated {replicator.lag_s:g}s after a write)")  # fmt: skip


def _banner_services(stack: Any, app: Any) -> None:
    """Where each service runs, and what the app checks of AWS's rules."""

    def origin(service: str) -> str:
        return "embedded" if service in stack.embedded else "from the environment"

    kept = "AWS's DynamoDB Local, tables kept in .local/dynamodb" if "dynamodb" in stack.embedded else None
    print(f"  DynamoDB   {stack.dynamodb_endpoint}  ({kept or origin('dynamodb')})")
    services = "moto server" if "services" in stack.embedded else "from the environment"
    print(f"  S3, SQS    {stack.services_endpoint}  ({services})")
    import sqlalchemy as sa

    url = sa.make_url(stack.database_url)
    tls = f"TLS {url.query['sslmode']}" if "sslmode" in url.query else "no TLS"
    shown = url.set(query={}).render_as_string(hide_password=True)  # the password: in .local/env
    print(f"  PostgreSQL {shown}  ({origin('postgresql')}; {tls}; the functions log in as their roles)")
    print(
        "  IAM        "
        + (
            "each function's AWS calls checked against its role's policies (--no-iam: off)"
            if app.iam
            else "NOT checked (--no-iam)"
        )
    )
    print(
        "  AWS facts  a VPC function reaches only what its VPC routes; a customer-key resource needs "
        "the key's actions; an alarm publishes through its topic's policy (`hybridsync doctor`)"
    )
    print(f"  schema     alembic revision {migrations.current_revision(stack.database_url)}")


def _banner_tables_and_functions(app: Any) -> None:
    """Each table with its indexes, stream and TTL; each function; each Kinesis destination."""
    from hybridsync.local.dynamodb.ttl import SWEEP_S

    swept = {sweeper.table: sweeper.attribute for sweeper in app.sweepers}
    for name in app.tables.values():
        description = app.client.describe_table(TableName=name)["Table"]
        stream = description.get("StreamSpecification", {}).get("StreamViewType")
        print(
            f"  table      {name}: {len(description.get('GlobalSecondaryIndexes', []))} GSIs"
            + (f", stream {stream}" if stream else "")
            + (f", TTL on {swept[name]} (every expired item, within {SWEEP_S:g} s)" if name in swept else "")
        )
    for name, function in app.functions.items():
        print(
            f"  function   {name}: {function.handler}, timeout {function.timeout_s:.0f}s, "
            f"{function.memory_mb} MB, from {function.asset.name[:18]}..."
        )
    for pump in app.pumps.values():
        shards = app._kinesis.list_shards(StreamName=pump.kinesis_name)["Shards"]
        print(f"  kinesis    {pump.table} -> {pump.kinesis_name}: {len(shards)} shards (moto server), filled "
              "by the app as DynamoDB's streaming destination (times in microseconds)")  # fmt: skip


def _banner_mappings(app: Any) -> None:
    """Each event source mapping with the settings the template gives it."""
    for s in app.mapping_settings.values():
        source = app.mapping_sources.get(s.name, "")
        extras = [
            f"{len(s.patterns)} filters",
            f"{s.max_retries} retries" if s.max_retries >= 0 else "retries until a record expires",
            f"tumbling {s.tumbling_window_s}s" if s.tumbling_window_s else "",
            "bisect" if s.bisect else "",
            "partial failures" if s.report_failures else "",
            _kinesis_source(source),
        ]
        print(
            f"  mapping    {s.name}: batch {s.batch_size}, window {s.batching_window_s:g}s, "
            + ", ".join(e for e in extras if e)
        )


def _drain_line(app: Any) -> None:
    """How PostgreSQL's changes reach DynamoDB, as the template says (what AWS would run)."""
    function = app.functions.get("SqlSync")
    if function is None:
        return
    poll_ms = function.environment.get("OUTBOX_POLL_MS")
    how = (f"each run polls the outbox every {poll_ms} ms until the next one takes over" if poll_ms
           else "each run drains once (freshness=economy)")  # fmt: skip
    print(f"  outbox     PostgreSQL -> DynamoDB: the SqlSync schedule starts the drain; {how}")


def add_status(cli: Commands) -> None:
    status = cli.add(
        "status",
        "what the running app's mappings, functions, outbox and alarms are doing",
        "hybridsync status --json",
        _status,
    )
    status.add_argument("--json", action="store_true", help="the whole status as JSON (`alarms`: name -> "
                        "state and reason)")  # fmt: skip
    _state_option(status)


def _status(args: argparse.Namespace) -> int:
    from hybridsync.local import running

    path = Path(args.state_dir) / "status.json"
    if not path.is_file():
        raise SystemExit(f"no {path}: is `hybridsync up` running (with --state-dir {args.state_dir})?")
    status = json.loads(path.read_text())
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    age = time.time() - status["at"]
    if moving := status.get("failover"):  # no status is written while the app is replaced
        print(f"failing over to {moving['to']}: {(moving['said'] or ['starting'])[-1]}")
    stale = age > 10 and (not moving or running.owner(Path(args.state_dir)) is None)
    print(f"as of {age:.0f}s ago" + ("  (stale: is `hybridsync up` still running?)" if stale else ""))
    print(
        f"{'mapping':<26} {'position':>24} {'delivered':>9} {'lag':>7} {'lag s':>7} {'failed':>6}  last error"
    )
    for name, m in status["mappings"].items():
        print(
            f"{name:<26} {m['position'] or '-':>24} {m['delivered']:>9} {m['lag_records']:>7} "
            f"{m['lag_s']:>7.1f} {m['sent_to_failure_queue']:>6}  {m['last_error'] or '-'}"
        )
        if m.get("blocked"):
            print(f"{'':<26} BLOCKED: {m['blocked']} ({m['retries']} retries)")
        if m.get("state", "Enabled") != "Enabled":  # paused (a rebuild, or by hand through the Lambda API)
            print(f"{'':<26} {m['state'].upper()}: not polling; its position is kept")
    print(f"{'function':<26} {'invocations':>11} {'errors':>7} {'cold':>5}  last error")
    for name, f in status["functions"].items():
        error = f["last_error"] or "-"
        print(f"{name:<26} {f['invocations']:>11} {f['errors']:>7} {f['cold_starts']:>5}  {error}")
    for name, count in status["failure_queues"].items():
        print(f"queue {name}: {count} message(s)")
    if status.get("unplaced"):
        print(f"items of no entity (last hour): {status['unplaced']}: their keys fit no key template of "
              "the model, so nothing syncs them (a writer outside it? docs/writers.md)")  # fmt: skip
    if status.get("failed_batches"):
        print(f"failed batches stored: {status['failed_batches']} (`hybridsync failed-batches list`)")
    alarms = status.get("alarms") or {}
    firing = {name: a for name, a in alarms.items() if a["state"] == "ALARM"}
    unmeasured = sum(1 for a in alarms.values() if a["reason"].startswith("not evaluated locally"))
    print(f"alarms: {len(firing)} in ALARM, {sum(a['state'] == 'OK' for a in alarms.values())} OK, "
          f"{unmeasured} not measured locally (DynamoDB, RDS Proxy, Aurora metrics)")  # fmt: skip
    for name, alarm in firing.items():
        print(f"  ALARM {name}: {alarm['reason']}")
    if drained := status.get("outbox"):
        print(
            f"outbox: {drained['depth']} waiting (oldest {drained['oldest_age_s']:.1f}s); since start "
            f"{drained['applied']} applied, {drained['superseded']} superseded, {drained['dead_lettered']} "
            f"dead-lettered, {drained['deferred']} deferred, {drained['errors']} failed drain(s)"
            + (f"; last error: {drained['last_error']}" if drained["last_error"] else "")
        )
    _freshness(status.get("freshness") or {})
    _replication(status.get("replication"))
    return 0


def _replication(figures: dict[str, Any] | None) -> None:
    """The twin of `up --regions`: home, each Region's writes and what it is behind, the latency per
    Region pair (as CloudWatch's ReplicationLatency), the faults on now."""
    if not figures:
        return
    print(f"replication: home {figures['home']}")
    for region, behind in figures["behind"].items():
        state = "cut off" if region in figures["cut_off"] else "down" if region in figures["down"] else "up"
        writes, replicated = figures["local_writes"].get(region, 0), figures["replicated"].get(region, 0)
        print(f"  {region:<16} {state:<8} {writes:>7} local writes, {replicated:>7} replicated in, "
              f"{behind} item(s) behind")  # fmt: skip
    for pair, latency in figures["latency"].items():
        print(f"  {pair:<33} latency p50 {latency['p50_ms']:.0f} ms, max {latency['max_ms']:.0f} ms")


FRESHNESS_DIRECTIONS = {"write_back": "DynamoDB -> PostgreSQL row", "aggregate": "DynamoDB -> aggregate",
                        "sql_sync": "PostgreSQL -> DynamoDB"}  # fmt: skip


def _freshness(freshness: dict[str, dict[str, Any]]) -> None:
    """Per direction: how long a write took to reach the other side (p50, p99 of the last 5
    minutes' batches, each its oldest change's), as the freshness alarms evaluate it."""
    if not freshness:
        return
    print(f"{'freshness, last 5 minutes':<42} {'p50 s':>7} {'p99 s':>7} {'batches':>7}")
    for direction, f in freshness.items():
        shown = [f"{f[k]:.3f}" if f[k] is not None else "-" for k in ("p50_s", "p99_s")]
        where = f"{FRESHNESS_DIRECTIONS.get(direction, direction)} ({direction})"
        print(f"  {where:<40} {shown[0]:>7} {shown[1]:>7} {f['count']:>7}")


def add_invoke(cli: Commands) -> None:
    invoke = cli.add(
        "invoke",
        "invoke one function of the app with one event",
        "hybridsync invoke write_back --event examples/shop/fixtures/order_insert.json",
        _invoke,
    )
    invoke.add_argument("function", help="the function's construct id (WriteBack or write_back, ...)")
    invoke.add_argument("--event", help="a JSON file holding the event (default {})")
    _state_option(invoke)
    _app_options(invoke)


def _invoke(args: argparse.Namespace) -> int:
    from hybridsync.local.app import LocalApp
    from hybridsync.local.awslambda.functions import FunctionError
    from hybridsync.local.template import Assembly, synth_if_stale

    assembly = Assembly.load(synth_if_stale(Path(args.assembly), synth=not args.no_synth))
    dynamodb = common.given(None, "DYNAMODB_ENDPOINT", "DynamoDB", "(no flag)")
    services = common.given(None, "AWS_ENDPOINT", "S3, SQS and Secrets Manager", "(no flag)")
    app = LocalApp(
        assembly,
        dynamodb_endpoint=dynamodb,
        services_endpoint=services,
        database_url=common.given(None, "DATABASE_URL", "database", "(no flag)"),
        state_dir=Path(args.state_dir),
        prefix=args.prefix,
        iam=not args.no_iam,
    )
    app.build_functions()
    event = json.loads(Path(args.event).read_text()) if args.event else {}
    try:
        app.ensure_logins()
        result = app.function(args.function).invoke(event)
    except FunctionError as error:
        print(json.dumps({"errorType": error.error_type, "errorMessage": error.message}, indent=1))
        return 1
    finally:
        app.stop()
    print(json.dumps(result, indent=1))
    return 0


def _state_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--state-dir", default=".local", help="where local state lives (default .local)")


def _app_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--prefix", default="hybridsync", help="table name prefix (default hybridsync)")
    sub.add_argument("--assembly", default="cdk.out", help="the synthesized app (default cdk.out)")
    sub.add_argument("--no-synth", action="store_true", help="use the assembly as it is, even if stale")
    sub.add_argument(
        "--no-iam",
        action="store_true",
        help="do not check each function's AWS calls against its role's policies (checked by default)",
    )
