"""The `hybridsync` command line: start a project, run its app locally, migrate its schema, check
both sides, and read what the model declares. Every command serves the project's model (see
`hybridsync.config`)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hybridsync import config, db, migrations


def _tables() -> dict[str, str]:
    """Logical -> physical name of the model's tables, from `TABLE_<NAME>` (`source .local/env`)."""
    names = {t.name: os.environ.get(f"TABLE_{t.name.upper()}", "") for t in config.model().tables}
    missing = [f"TABLE_{n.upper()}" for n, physical in names.items() if not physical]
    if missing:
        raise SystemExit(
            f"no {', '.join(missing)}: set them (e.g. `source .local/env` beside `hybridsync up`)"
        )
    return names


def _up(args: argparse.Namespace) -> int:
    import threading

    from hybridsync import local
    from hybridsync.local.app import LocalApp
    from hybridsync.local.template import Assembly, synth_if_stale

    started = time.monotonic()
    state = Path(args.state_dir)
    config.hooks("routes")  # a routes module that cannot load would answer every request 500: say so now
    assembly = Assembly.load(synth_if_stale(Path(args.assembly), synth=not args.no_synth))
    with local.start(
        state, args.prefix, tables=False, keep_dynamodb=True, pg_max_connections=args.pg_max_connections
    ) as stack:
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
        )
        stop = threading.Event()
        drainer = app.outbox_drainer(stop)
        status_file = state / "status.json"
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with Ctrl-C ignored
        try:
            app.start(http_port=args.port)
            drainer.start()
            stack.table_names = dict(app.table_names)
            stack.bucket_names = {c.removesuffix("Bucket").lower(): name for c, name in app.buckets.items()}
            env_file = state / "env"
            env = stack.environment() | {"FAILURE_QUEUES": ",".join(app.queues.values())}
            if app.streams_server is not None:
                env["DYNAMODB_STREAMS_ENDPOINT"] = app.streams_server.endpoint
            env |= local.plain_boto3(env)
            env_file.write_text("".join(f"export {k}={v!r}\n" for k, v in env.items()))
            took = time.monotonic() - started
            print(f"hybridsync: the app of {args.assembly}/ running locally, up in {took:.1f}s")
            _banner(stack, app, env_file)
            if args.demo or args.seed:
                from rich.console import Console

                from hybridsync import db
                from hybridsync.local import report

                hook = "demo" if args.demo else "seed"
                runs = config.hooks(hook)
                if not runs:
                    raise SystemExit(
                        f"--{hook}: name a function in pyproject.toml ([tool.hybridsync] {hook} = "
                        f'"myapp.{hook}:run")'
                    )
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
            while True:
                status_file.write_text(json.dumps(app.status(), indent=1))
                time.sleep(2)
        except KeyboardInterrupt:
            print("stopping: delivering what was read, then stopping the functions")
        finally:
            app.stop()
            stop.set()  # let the drainer finish before PostgreSQL goes away
            if drainer.is_alive():
                drainer.join(timeout=10)
            status_file.unlink(missing_ok=True)
    return 0


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


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def _plan(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hybridsync import plan

    work = plan.Workload(
        writes_per_s=args.writes_per_s, item_kb=args.item_kb, reads_per_s=args.reads_per_s,
        order_line_share=args.order_line_share, retention_days=args.retention_days,
    )  # fmt: skip
    result = plan.plan(work)
    if args.json:
        print(json.dumps(vars(result)))
        return 0
    table = Table("", "", title=f"{args.writes_per_s:,.0f} writes/s of {args.item_kb:g} KB, "
                  f"{args.reads_per_s:,.0f} reads/s (prices of {result.prices_as_of}, us-east-1)")  # fmt: skip  # noqa: E501
    rows = {"write units/s": f"{result.write_units_per_s:,.0f}", "partitions": result.partitions,
            "stream shards": result.shards, "PostgreSQL connections": result.pg_connections,
            "Aurora ACU": result.aurora_acu, "Lambda GB-s / month": f"{result.lambda_gb_s_month:,}"}  # fmt: skip  # noqa: E501
    rows |= {f"concurrency: {k}": v for k, v in result.concurrency.items()}
    rows |= {f"GSI write shards: {k}": v for k, v in result.gsi_shards.items()}
    rows |= {f"$/month: {k}": f"{v:,.2f}" for k, v in result.monthly_usd.items()}
    for name, value in rows.items():
        table.add_row(name, str(value))
    Console().print(table)
    for note in result.notes:
        print(f"- {note}")
    return 0


def _fault_plan(text: str) -> Any:
    from hybridsync.local.faults import FaultPlan

    try:
        return FaultPlan.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _banner(stack: Any, app: Any, env_file: Path) -> None:
    def origin(service: str) -> str:
        return "embedded" if service in stack.embedded else "from the environment"

    kept = "AWS's DynamoDB Local, tables kept in .local/dynamodb" if "dynamodb" in stack.embedded else None
    print(f"  DynamoDB   {stack.dynamodb_endpoint}  ({kept or origin('dynamodb')})")
    services = "moto server" if "services" in stack.embedded else "from the environment"
    print(f"  S3, SQS    {stack.services_endpoint}  ({services})")
    print(f"  PostgreSQL {stack.database_url}  ({origin('postgresql')})")
    print(
        "  IAM        "
        + (
            "each function's AWS calls checked against its role's policies (--no-iam: off)"
            if app.iam
            else "NOT checked (--no-iam)"
        )
    )
    print(f"  schema     alembic revision {migrations.current_revision(stack.database_url)}")
    from hybridsync.local.ttl import SWEEP_S

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
    for s in app.mapping_settings.values():
        extras = [
            f"tumbling {s.tumbling_window_s}s" if s.tumbling_window_s else "",
            "bisect" if s.bisect else "",
            "partial failures" if s.report_failures else "",
        ]
        print(
            f"  mapping    {s.name}: batch {s.batch_size}, window {s.batching_window_s:g}s, "
            f"{len(s.patterns)} filters, {s.max_retries} retries, " + ", ".join(e for e in extras if e)
        )
    if app.http is not None:
        print(
            f"  HTTP API   http://127.0.0.1:{app.http.server_address[1]}/  (callers' IAM authorization is "
            "not checked locally)"
        )
    for name in app.queues:
        print(f"  queue      {name} (failed batches)")
    for name in app.buckets.values():
        print(f"  bucket     {name} (S3 on moto server, AWS_ENDPOINT)")
    if app.custom_resources:
        print(f"  deploy     ran {', '.join(app.custom_resources)} (custom resources, as a deploy does)")
    from hybridsync import timeseries

    for series in config.model().time_series:
        days = sorted(timeseries.tables(app.client, app.prefix, series))
        print(
            f"  series     {app.prefix}-{series.table.name}-<day>: {', '.join(days) or 'none yet'} "
            "(a table per day, rotated by the Rotate function)"
        )
    if app.faults:
        print(f"  faults     {app.faults.plan} injected into stream deliveries")
    print("  outbox     PostgreSQL changes reach DynamoDB on NOTIFY, and on the drain's schedule")
    if app.streams_server is not None:
        print(f"  streams    {app.streams_server.endpoint}  (the app's DynamoDB Streams API, for any reader)")
    print(f"  env        source {env_file}  (for other shells, the hybridsync commands, plain boto3 and the "
          "AWS CLI); `hybridsync status` for lag and the outbox")  # fmt: skip


def _status(args: argparse.Namespace) -> int:
    path = Path(args.state_dir) / "status.json"
    if not path.is_file():
        raise SystemExit(f"no {path}: is `hybridsync up` running (with --state-dir {args.state_dir})?")
    status = json.loads(path.read_text())
    age = time.time() - status["at"]
    print(f"as of {age:.0f}s ago" + ("  (stale: is `hybridsync up` still running?)" if age > 10 else ""))
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
    print(f"{'function':<26} {'invocations':>11} {'errors':>7} {'cold':>5}  last error")
    for name, f in status["functions"].items():
        error = f["last_error"] or "-"
        print(f"{name:<26} {f['invocations']:>11} {f['errors']:>7} {f['cold_starts']:>5}  {error}")
    for name, count in status["failure_queues"].items():
        print(f"queue {name}: {count} message(s)")
    if drained := status.get("outbox"):
        print(
            f"outbox: {drained['depth']} waiting (oldest {drained['oldest_age_s']:.1f}s); since start "
            f"{drained['applied']} applied, {drained['superseded']} superseded, {drained['dead_lettered']} "
            f"dead-lettered, {drained['deferred']} deferred, {drained['errors']} failed drain(s)"
            + (f"; last error: {drained['last_error']}" if drained["last_error"] else "")
        )
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from hybridsync.local.app import LocalApp
    from hybridsync.local.functions import FunctionError
    from hybridsync.local.template import Assembly, synth_if_stale

    assembly = Assembly.load(synth_if_stale(Path(args.assembly), synth=not args.no_synth))
    dynamodb = _given(None, "DYNAMODB_ENDPOINT", "DynamoDB", "(no flag)")
    services = os.environ.get("AWS_ENDPOINT") or dynamodb
    app = LocalApp(
        assembly,
        dynamodb_endpoint=dynamodb,
        services_endpoint=services,
        database_url=_given(None, "DATABASE_URL", "database", "(no flag)"),
        state_dir=Path(args.state_dir),
        prefix=args.prefix,
        iam=not args.no_iam,
    )
    app.build_functions()
    event = json.loads(Path(args.event).read_text()) if args.event else {}
    try:
        result = app.function(args.function).invoke(event)
    except FunctionError as error:
        print(json.dumps({"errorType": error.error_type, "errorMessage": error.message}, indent=1))
        return 1
    finally:
        app.stop()
    print(json.dumps(result, indent=1))
    return 0


def _given(value: str | None, variable: str, what: str, flag: str) -> str:
    """A flag's value, else the environment's, else a clear error saying how to give it."""
    value = value or os.environ.get(variable)
    if not value:
        raise SystemExit(f"no {what}: pass {flag} or set {variable} (e.g. `source .local/env`)")
    return value


def _database_url(args: argparse.Namespace) -> str:
    return _given(args.url, "DATABASE_URL", "database", "--url")


def _migrations(args: argparse.Namespace) -> int:
    if args.action in ("generate", "check") and not (args.url or os.environ.get("DATABASE_URL")):
        return _on_scratch_database(args)  # no database named: a throw-away one at the revisions' heads
    url = _database_url(args)
    if args.action == "upgrade":
        migrations.upgrade(url, args.revision or "heads")
    elif args.action == "downgrade":
        if not args.revision:
            raise SystemExit("downgrade needs a revision, e.g. `hybridsync migrations downgrade base`")
        migrations.downgrade(url, args.revision)
    elif args.action == "generate":
        return _generate(url, args.message)
    elif args.action == "check":
        return _check(url)
    print(f"schema at revision {migrations.current_revision(url)}")
    return 0


def _on_scratch_database(args: argparse.Namespace) -> int:
    import tempfile

    from hybridsync import local

    with tempfile.TemporaryDirectory(prefix="hybridsync-migrations-") as folder:
        url, stop = local.start_postgres(Path(folder) / "postgres")
        try:
            if args.action == "check":
                migrations.upgrade(url)  # what the revisions build, compared with the model
            return _generate(url, args.message) if args.action == "generate" else _check(url)
        finally:
            stop()


def _generate(url: str, message: str | None) -> int:
    if not message:
        raise SystemExit('generate needs a message: hybridsync migrations generate -m "add invoices"')
    written = migrations.generate(url, message)
    print(
        f"wrote {written}"
        if written
        else "the database at the revisions' heads already matches the model: no revision written"
    )
    return 0


def _check(url: str) -> int:
    differences = migrations.check(url)
    for line in differences.lines():
        print(line)
    print(
        "the database differs from the model: `hybridsync migrations generate -m ...`, then upgrade"
        if differences
        else "the database matches the model (tables, columns, types and triggers)"
    )
    return 1 if differences else 0


def _table_name(args: argparse.Namespace) -> str:
    """`--table`, else the model's first table (`TABLE_<NAME>`)."""
    return args.table or _tables()[config.model().tables[0].name]


def _declared(physical: str) -> Any:
    """The model's table a physical name is of (by `TABLE_<NAME>`), else the model's first."""
    model = config.model()
    return next(
        (t for t in model.tables if os.environ.get(f"TABLE_{t.name.upper()}") == physical), model.tables[0]
    )


def _show_keys(keys: list, limit: int = 10) -> str:
    shown = ", ".join("/".join(map(str, k)) for k in keys[:limit])
    return shown + (f" ... (+{len(keys) - limit})" if len(keys) > limit else "")


@contextlib.contextmanager
def _scanning(what: str) -> Iterator[Callable[[Any], None]]:
    """A live line while a scan runs (items, requests, read units so far), gone when it ends."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True) as progress:
        task = progress.add_task(what)

        def update(cost: Any) -> None:
            progress.update(
                task,
                description=f"{what}: {cost.items_read:,} items, {cost.requests:,} "
                f"requests, {cost.read_units:,.1f} read units",
            )

        yield update


def _scanner(
    args: argparse.Namespace, table: str, progress: Callable[[Any], None], index: str | None = None
) -> Any:
    from hybridsync import aws
    from hybridsync.scans import Scanner

    return Scanner(
        aws.client("dynamodb"),
        table,
        index,
        segments=args.segments,
        page_limit=args.page_limit,
        rate=args.rate or None,
        consistent=getattr(args, "consistent", False),
        progress=progress,
    )


def _spent(cost: Any) -> str:
    reported = "" if cost.consumed is None else f" (DynamoDB reported {cost.consumed:,.1f})"
    return (
        f"read {cost.items_read:,} items in {cost.requests:,} requests: {cost.read_units:,.1f} read "
        f"units by the model{reported}"
    )


def _reconcile(args: argparse.Namespace) -> int:
    from hybridsync import aws, exports
    from hybridsync.sync.reconcile import reconcile

    engine = db.create_engine(_database_url(args))
    tables = {name: args.table for name in _tables()} if args.table else _tables()
    s3 = aws.client("s3") if args.from_export else None
    exported = {}  # physical table -> the export read instead of it
    for url in args.from_export or []:
        try:
            export = exports.Export.parse(url)
            exported[exports.table_name(s3, export)] = export
        except (ValueError, exports.ExportError) as error:
            raise SystemExit(f"--from-export: {error}") from None
    if stray := set(exported) - set(tables.values()):
        raise SystemExit(f"--from-export: an export of {', '.join(sorted(stray))}, not one of the model's "
                         f"tables ({', '.join(sorted(set(tables.values())))})")  # fmt: skip
    scanners: list[Any] = []
    read = sorted(set(tables.values()))
    with _scanning(f"reading {', '.join(exported[t].url if t in exported else t for t in read)}") as progress:

        def scanner(table: str) -> Any:
            scanners.append(exports.ExportReader(s3, exported[table]) if table in exported
                            else _scanner(args, table, progress))  # fmt: skip
            return scanners[-1]

        report = reconcile(
            aws.client("dynamodb"), tables, engine, config.model(), repair=args.repair, scanner=scanner
        )
    for scanned in scanners:
        if isinstance(scanned, exports.ExportReader):
            print(f"{scanned.table_name}: read from the export, not the table (0 read units)")
        else:
            print(f"{scanned.table_name}: " + _spent(scanned.cost))
    print(f"{'entity':12} {'checked':>8} {'missing':>8} {'stale':>6} {'extra':>6} {'unmappable':>10}")
    for name, drift in report.items():
        print(
            f"{name:12} {drift.checked:8} {len(drift.missing):8} {len(drift.stale):6} "
            f"{len(drift.extra):6} {len(drift.unmappable):10}"
        )
        for label in ("missing", "stale", "extra"):
            if keys := getattr(drift, label):
                print(f"  {label}: {_show_keys(keys)}")
        for label in ("unmappable", "unrepaired"):
            for problem in getattr(drift, label)[:10]:
                print(f"  {label}: {problem}")
    drifted = sum(d.total for d in report.values())
    if args.repair and drifted:
        unrepaired = sum(len(d.unrepaired) for d in report.values())
        print(f"repaired {drifted - unrepaired} row(s) from DynamoDB, {unrepaired} refused by PostgreSQL")
        return 1 if unrepaired else 0
    return 1 if drifted else 0


def _reindex(args: argparse.Namespace) -> int:
    from hybridsync import aws
    from hybridsync.reindex import reindex

    tables = [args.table] if args.table else sorted(set(_tables().values()))
    client, out_of_date, failed = aws.client("dynamodb"), 0, 0
    for table in tables:
        with _scanning(f"reading {table}") as progress:
            scanner = _scanner(args, table, progress)
            report = reindex(client, table, _declared(table), config.model(), scanner.items(),
                             dry_run=args.dry_run, rate=args.rate or None)  # fmt: skip
        print(f"{table}: " + _spent(scanner.cost))
        done = "out of date" if args.dry_run else "updated"
        header = ("checked", "current", done, "written meanwhile", "invalid")
        print(
            f"  {'entity':20} "
            + " ".join(f"{h:>{w}}" for h, w in zip(header, (8, 8, 11, 17, 7), strict=True))
        )
        for name, counts in report.entities.items():
            print(f"  {name:20} {counts.checked:8} {counts.current:8} {counts.updated:11} "
                  f"{counts.written_meanwhile:17} {counts.invalid:7}")  # fmt: skip
        units = f"{report.write_units:g} write units by the model{' to update them' * args.dry_run}"
        print(f"  {report.not_declared} item(s) of no entity declared on the table, left alone; {units}")
        for example in report.examples if args.dry_run else []:
            print(f"  out of date: {example}")
        for problem in report.invalid:
            print(f"  invalid, left alone: {problem}")
        for problem in report.failed[:10]:
            print(f"  failed: {problem}")
        out_of_date, failed = out_of_date + report.out_of_date, failed + len(report.failed)
    return 1 if failed or (args.dry_run and out_of_date) else 0


def _dead_letters(args: argparse.Namespace) -> int:
    from hybridsync import deadletters
    from hybridsync.sync import outbox, writeback

    engine = db.create_engine(_database_url(args))
    if args.action == "list":
        with engine.connect() as conn:
            rows = deadletters.pending(conn, args.source, args.id)
        for row in rows:
            record = row.record if isinstance(row.record, dict) else {}
            event = record.get("eventName") or record.get("operation") or "?"
            print(f"{row.id:6} {row.created_at:%Y-%m-%d %H:%M:%S} {row.source:10} {event:7} {row.reason}")
        print(f"{len(rows)} pending dead letter(s)")
        return 0
    if args.source not in (None, writeback.SOURCE, outbox.SOURCE):
        raise SystemExit(f"redrive knows the sources: {writeback.SOURCE}, {outbox.SOURCE}")
    landed, still = 0, []
    if args.source in (None, writeback.SOURCE):
        landed, still = writeback.redrive(engine, config.model(), args.id)
    if args.source in (None, outbox.SOURCE):
        from hybridsync import aws

        views = outbox.redrive(engine, aws.client("dynamodb"), config.model(), _tables(), args.id)
        landed, still = landed + views[0], still + views[1]
    print(f"redriven: {landed} landed, {len(still)} still rejected")
    for letter in still:
        print(f"  {letter.record.get('eventID') or letter.record.get('outbox_id', '?')}: {letter.reason}")
    return 1 if still else 0


def _failed_batches(args: argparse.Namespace) -> int:
    from hybridsync import aws
    from hybridsync.sync import failed

    queues = args.queue or [q for q in os.environ.get("FAILURE_QUEUES", "").split(",") if q]
    if not queues:
        raise SystemExit(
            "no failure queue: pass --queue URL (the stack's ...FailuresQueueUrl outputs) or "
            "set FAILURE_QUEUES (e.g. `source .local/env`)"
        )
    sqs = aws.client("sqs")
    if args.action == "list":
        batches = [b for url in queues for b in failed.pending(sqs, url, hold_s=1)]
        for b in batches:
            print(
                f"{b.at[:19]:19} {b.consumer or '?':10} {b.condition:24} {b.size:5} record(s) "
                f"{b.shard} {b.first}..{b.last}"
            )
        print(f"{len(batches)} failed batch(es), {sum(b.size for b in batches)} record(s)")
        return 0
    engine = db.create_engine(_database_url(args))
    done = failed.redrive(
        sqs,
        aws.client("dynamodbstreams"),
        queues,
        client=aws.client("dynamodb"),
        tables=_tables(),
        engine=engine,
        model=config.model(),
    )
    print(
        f"redriven: {done.batches} batch(es), {done.records} record(s), {done.applied} changed something "
        f"(the rest were applied already); {len(done.left)} left in the queue"
    )
    for batch, why in done.left:
        print(f"  {batch.consumer or '?'} {batch.shard} {batch.first}..{batch.last}: {why}")
    return 1 if done.left else 0


def _top(args: argparse.Namespace) -> int:
    from hybridsync import aws
    from hybridsync.reads import rankings

    model = config.model()
    try:
        aggregate = model.aggregate(args.aggregate)
    except KeyError:
        ranked = [a.name for a in model.aggregates if a.rank]
        raise SystemExit(
            f"no aggregate {args.aggregate!r}; the ranked ones: {', '.join(ranked) or 'none'}"
        ) from None
    try:
        period = rankings.period_of(args.day, args.month, periods=aggregate.periods)
        rows = rankings.top_of(
            aws.client("dynamodb"), args.table or _tables()[aggregate.table.name], aggregate, period, args.n
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if args.json:
        from hybridsync.views import public

        print(json.dumps({"aggregate": aggregate.name, "period": period,
                          "top": [public(aggregate.entity, row) for row in rows]}))  # fmt: skip
        return 0
    print(
        f"top {args.n} of {aggregate.name} by {aggregate.rank.measure if aggregate.rank else '?'}, {period}"
    )
    for place, row in enumerate(rows, 1):
        group = " ".join(str(row[g]) for g in aggregate.group_by)
        measures = "  ".join(f"{m.name} {row.get(m.name, 0)}" for m in aggregate.measures)
        print(f"{place:4}. {group:30} {measures}")
    return 0


def _distinct_keys(args: argparse.Namespace) -> int:
    from hybridsync import scans

    table = _table_name(args)
    declared = _declared(table)
    if args.by == "index" and not declared.distinct_index:
        raise SystemExit(f"table {declared.name} declares no distinct_index: use --by skip-scan or --by scan")
    index = declared.distinct_index if args.by == "index" else None
    with _scanning(f"distinct keys of {table} by {args.by}") as progress:
        scanner = _scanner(args, table, progress, index)
        if args.by == "index":
            found = scans.distinct_keys_by_index(scanner, declared.index(index).partition.name)
        elif args.by == "skip-scan":
            found = scans.skip_scan(scanner, declared.partition, scans.table_sort_key(declared))
        else:
            found = scans.distinct_keys_by_scan(scanner, declared.partition.name)
        keys = list(found)
    if not args.count:
        for key in sorted(keys):
            print(key)
    print(f"{len(keys):,} distinct partition keys; " + _spent(scanner.cost), file=sys.stderr)
    return 0


def _cost(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hybridsync import costs

    rows = []
    if args.pattern in ("all", "distinct-keys"):
        rows += costs.distinct_keys(args.keys, args.items_per_key, args.item_size, args.index_entry_size)
    if args.pattern in ("all", "time-range"):
        rows += costs.time_range(
            args.days, args.items_per_day, args.entry_size, args.shards, args.reads_per_s
        )
    if args.pattern in ("all", "open-orders"):
        rows += costs.selective(
            args.days * args.items_per_day,
            args.item_size,
            min(args.matching, args.days * args.items_per_day),
            args.entry_size,
            args.open_shards,
            args.reads_per_s,
        )
    if args.pattern in ("all", "price-change"):
        rows += costs.price_change(args.static_size, args.small_size, args.writes_per_s)
    if args.pattern in ("all", "order-lines"):
        rows += costs.order_with_lines(args.lines, args.entry_size, args.item_size, args.reads_per_s)
    if args.pattern in ("all", "write-sharding"):
        rows += costs.write_sharding(args.shards, args.days * args.items_per_day, args.entry_size,
                                     args.reads_per_s)  # fmt: skip
    scan = None
    if args.pattern in ("all", "scan"):
        try:
            scan = costs.scan(args.table_gb, args.item_size, args.rate)
        except ValueError as error:
            raise SystemExit(f"cost scan: {error}") from None
        rows.append(costs.Row("full table scan", f"{args.table_gb:g} GB, paced to {args.rate:g} units/s",
                              scan.cost))  # fmt: skip
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "pattern": r.pattern,
                        "design": r.design,
                        "naive": r.naive,
                        **r.cost.as_dict(),
                        "units_per_s": r.units_per_second,
                    }
                    for r in rows
                ]
                + ([{"pattern": "full table scan", "minutes": round(scan.minutes, 1), "rate": scan.rate,
                     "parallel": scan.parallel, "segments": scan.segments}] if scan else [])
            )
        )  # fmt: skip
        return 0
    table = Table(title="what each access pattern costs (capacity model; eventually consistent reads)")
    for column in ("pattern", "design", "requests", "items read", "read units", "write units", "units/s"):
        table.add_column(column, justify="left" if column in ("pattern", "design") else "right", no_wrap=True)
    for row in rows:
        c = row.cost
        table.add_row(
            row.pattern,
            ("[dim]naive:[/] " if row.naive else "") + row.design,
            f"{c.requests:,}",
            f"{c.items_read:,}",
            f"{c.read_units:,.1f}",
            f"{c.write_units:,.0f}",
            f"{row.units_per_second:,.1f}" if row.per_second else "-",
        )
    Console(width=None if sys.stdout.isatty() else 170).print(table)
    print("1 read unit = 4 KB (4,096 bytes) strongly consistent, or 8 KB eventually consistent.")
    if args.pattern in ("all", "distinct-keys"):
        print("The seeds' 125,000,000 and 37,500 divide by 4,000-byte kilobytes: 2.4% above the model.")
    if scan:
        hours = f" ({scan.minutes / 60:,.1f} h)" if scan.minutes >= 120 else ""
        print(f"A full scan of {scan.table_gb:g} GB: {scan.cost.read_units:,.0f} read units, "
              f"{scan.minutes:,.1f} minutes{hours} at {scan.rate:g} units/s.")  # fmt: skip
        if scan.parallel:
            print(f"A parallel scan is warranted (>= {costs.PARALLEL_SCAN_GB} GB) if read capacity is "
                  f"spare and one scan is too slow: start with {scan.segments} segments (one per "
                  f"{costs.GB_PER_SEGMENT} GB); the rate is their total.")  # fmt: skip
        else:
            print(f"Under {costs.PARALLEL_SCAN_GB} GB a parallel scan is not warranted: one scan, paced.")
    return 0


def _timeseries(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from hybridsync import aws, settings, timeseries

    if args.action == "query" and not (args.source and args.start and args.end):
        raise SystemExit(
            "query needs --source, --from and --to, e.g. --source dev-1 --from 2026-11-20 --to 2026-11-22"
        )
    try:
        now = datetime.fromisoformat(args.at.replace("Z", "+00:00")) if args.at else datetime.now(UTC)
    except ValueError:
        raise SystemExit(f"--at must be an ISO-8601 time, got {args.at!r}") from None
    if now.tzinfo is None:
        raise SystemExit("--at needs a timezone, e.g. 2026-11-22T00:00:00Z")
    client = aws.client("dynamodb")
    model = config.model()
    if not model.time_series:
        raise SystemExit("the model declares no time series")
    try:
        series = next(s for s in model.time_series if args.series in (None, s.entity.name, s.table.name))
    except StopIteration:
        names = ", ".join(s.entity.name for s in model.time_series)
        raise SystemExit(f"no time series {args.series!r}; the model's: {names}") from None
    if args.action == "rotate":
        bucket = _given(args.bucket, "BUCKET_BODIES", "bucket for archives", "--bucket")
        done = timeseries.rotate(
            client, aws.client("s3"), bucket, args.prefix or settings.series_prefix(), now, series
        )
        for label in ("created", "lowered", "dropped"):
            print(f"{label:8} {', '.join(getattr(done, label)) or '-'}")
        for name, key in done.archived.items():
            print(f"archived {name} -> s3://{bucket}/{key}")
        return 0
    prefix = args.prefix or settings.series_prefix()
    if args.action == "list":
        for label, name in sorted(timeseries.tables(client, prefix, series).items()):
            print(f"{label}  {name}")
        return 0
    if not (args.source and args.start and args.end):
        raise SystemExit(
            "query needs --source, --from and --to, e.g. --source dev-1 --from 2026-11-20 --to 2026-11-22"
        )
    partition = series.entity.table.partition.name
    names = getattr(series.entity.keys[partition], "names", ())
    if len(names) != 1:
        raise SystemExit(
            f"{series.entity.name}: --source names one value of its partition key; it has {names}"
        )
    items, missing = timeseries.query(client, prefix, {names[0]: args.source}, args.start, args.end, series)
    for item in items:
        print(json.dumps(item, default=str))
    if missing:
        print(f"no table (archived and dropped, or never created) for: {', '.join(missing)}", file=sys.stderr)
    return 0


def _openapi(args: argparse.Namespace) -> int:
    from hybridsync.functions import api  # loads the project's routes

    text = json.dumps(api.document(), indent=1, ensure_ascii=False) + "\n"
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


def _model(_: argparse.Namespace) -> int:
    model = config.model()
    print(f"model {config.model_spec()}")
    for table in model.tables:
        keys = " + ".join(a.name for a in table.key_schema())
        stream = ", stream" if table.stream else ""
        print(f"table {table.name} ({keys}{stream}): {table.purpose}")
        for index in table.indexes:
            keys = " + ".join(a.name for a in (index.partition, index.sort) if a)
            sharded = {e.name: e.shards(index.partition.name) for e in model.all_entities if e.table is table}
            shards = ", ".join(f"{name} in {n} shards" for name, n in sharded.items() if n > 1)
            print(
                f"  GSI {index.name} ({keys}, {index.projection}{', ' + shards if shards else ''}): "
                f"{index.purpose}"
            )
    print("entities:")
    for entity in model.all_entities:
        sql = (
            f" <-> SQL {entity.sql_table}" + ("" if entity.managed else " (the project's own)")
            if entity.sql_table
            else ""
        )
        print(f"  {entity.name:20} {entity.table.name:8} {entity.master:10}{sql}")
    for aggregate in model.aggregates:
        measures = ", ".join(m.name for m in aggregate.measures)
        rank = f"; ranked by {aggregate.rank.measure} in {aggregate.rank.index}" if aggregate.rank else ""
        sources = ", ".join(("-" if s.sign < 0 else "") + s.entity.name for s in aggregate.sources)
        print(
            f"aggregate {aggregate.name}: {measures} of {sources} by {', '.join(aggregate.group_by)} per "
            f"{'/'.join(aggregate.periods)}{rank}"
        )
    for series in model.time_series:
        print(f"time series {series.entity.name}: a table per {series.period}, kept {series.keep}")
    return 0


def _init(args: argparse.Namespace) -> int:
    from hybridsync import scaffold

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
        "  npx cdk synth                    # the CloudFormation of it all"
    )
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="hybridsync",
        description=__doc__,
        epilog="example: hybridsync up   (then, in another shell: source .local/env && hybridsync reconcile)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True)

    from hybridsync.scans import DEFAULT_RATE

    def scan_options(sub: argparse.ArgumentParser, paced: str = "read units") -> None:
        sub.add_argument("--segments", type=int, default=1, help="parallel scan segments (default 1)")
        sub.add_argument("--rate", type=float, default=DEFAULT_RATE,
                         help=f"pace to this many {paced} per second (default {DEFAULT_RATE:g}; "
                         "0: as fast as DynamoDB answers)")  # fmt: skip
        sub.add_argument("--page-limit", type=int, help="items per Scan request (smaller pages spread load)")

    def command(name: str, summary: str, example: str, run: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=summary, epilog=f"example: {example}")
        sub.set_defaults(run=run)
        return sub

    init = command(
        "init",
        "write a working hybridsync project into an empty folder: its model (one "
        "DynamoDB-mastered entity, one PostgreSQL-mastered, one ranked aggregate), first "
        "migration, seed, tests, cdk.json",
        "hybridsync init myapp && cd myapp && hybridsync up --seed --once",
        _init,
    )
    init.add_argument("directory", help="an empty (or new) folder")
    init.add_argument("--package", help="the Python package to write (default: the folder's name)")

    up = command(
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
    up.add_argument(
        "--faults",
        type=_fault_plan,
        default=None,
        metavar="PLAN",
        help="inject faults into stream deliveries, seeded: e.g. "
        "duplicate=0.2,fail_before=0.05,fail_after=0.05,conflict=0.5,seed=7",
    )
    up.add_argument(
        "--shards",
        type=_positive(int),
        default=1,
        help="stream shards per table, by partition-key hash, as production has them (default 1: "
        "DynamoDB Local's own); e.g. --shards 4 --shard-lifetime 20",
    )
    up.add_argument(
        "--shard-lifetime",
        type=_positive(float),
        metavar="S",
        help="seal every shard after S seconds and continue it in a child (AWS: about 4 hours)",
    )
    up.add_argument(
        "--shard-records",
        type=_positive(int),
        metavar="N",
        help="also seal a shard once it holds N records (a short run's rollover, whatever its speed)",
    )
    up.add_argument(
        "--retention",
        type=_positive(float),
        metavar="S",
        help="trim stream records older than S seconds (AWS: 24 hours); readers behind it lose records",
    )
    up.add_argument(
        "--pg-max-connections",
        type=_positive(int),
        metavar="N",
        help="the embedded PostgreSQL's max_connections (a small Aurora allows a few hundred)",
    )
    status = command(
        "status", "what the running app's mappings and functions are doing", "hybridsync status", _status
    )
    planned = command(
        "plan",
        "the pipeline for a described workload, on paper: shards, concurrency, PostgreSQL connections, "
        "GSI write shards, where warm and burst capacity matter, and the monthly cost by component",
        "hybridsync plan --writes-per-s 10000 --item-kb 1 --reads-per-s 20000 --json",
        _plan,
    )
    planned.add_argument(
        "--writes-per-s", type=_positive(float), required=True, help="item writes per second"
    )
    planned.add_argument(
        "--item-kb", type=_positive(float), default=1.0, help="average item size (default 1)"
    )
    planned.add_argument("--reads-per-s", type=float, default=0.0, help="API reads per second (default 0)")
    planned.add_argument("--order-line-share", type=float, default=0.6,
                         help="share of writes that feed the aggregates (default 0.6)")  # fmt: skip
    planned.add_argument("--retention-days", type=int, default=30, help="S3 archive kept (default 30)")
    planned.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    invoke = command(
        "invoke",
        "invoke one function of the app with one event",
        "hybridsync invoke write_back --event examples/shop/fixtures/order_insert.json",
        _invoke,
    )
    invoke.add_argument("function", help="the function's construct id (WriteBack or write_back, ...)")
    invoke.add_argument("--event", help="a JSON file holding the event (default {})")
    for sub in (up, status, invoke):
        sub.add_argument("--state-dir", default=".local", help="where local state lives (default .local)")
    for sub in (up, invoke):
        sub.add_argument("--prefix", default="hybridsync", help="table name prefix (default hybridsync)")
        sub.add_argument("--assembly", default="cdk.out", help="the synthesized app (default cdk.out)")
        sub.add_argument("--no-synth", action="store_true", help="use the assembly as it is, even if stale")
        sub.add_argument(
            "--no-iam",
            action="store_true",
            help="do not check each function's AWS calls against its role's policies (checked by default)",
        )

    migrate = command(
        "migrations",
        "the PostgreSQL schema (Alembic, two branches: the engine's and the "
        "project's): upgrade, downgrade, current; generate the project's next revision from "
        "its model (outbox triggers included); check a database against the model (exit 1 "
        "if it differs)",
        'hybridsync migrations generate -m "add invoices"',
        _migrations,
    )
    migrate.add_argument("action", choices=["upgrade", "downgrade", "current", "generate", "check"])
    migrate.add_argument("revision", nargs="?", help="target revision (default heads for upgrade)")
    migrate.add_argument("-m", "--message", help="generate: what the revision does")
    migrate.add_argument(
        "--url",
        help="PostgreSQL URL (default $DATABASE_URL; generate and check without "
        "one use a throw-away embedded PostgreSQL at the revisions' heads)",
    )
    commands._name_parser_map["db"] = migrate  # the command's old name

    check = command(
        "reconcile",
        "compare written-back entities in DynamoDB with PostgreSQL, reading the table by a paced "
        "scan or a point-in-time export; exit 1 on drift",
        "hybridsync reconcile --repair --from-export s3://my-bucket/exports/AWSDynamoDB/01700000000000-ab12cd34/",
        _reconcile,
    )
    check.add_argument("--repair", action="store_true", help="re-apply DynamoDB's state to PostgreSQL")
    check.add_argument(
        "--table", help="one DynamoDB table holding every entity (default: each table's $TABLE_<NAME>)"
    )
    check.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")
    check.add_argument(
        "--from-export", action="append", metavar="S3_URL",
        help="read a table's point-in-time export (s3://bucket/.../AWSDynamoDB/<export id>/) instead of "
        "the live table (repeatable; a restored copy: --table)",
    )  # fmt: skip
    scan_options(check)
    check.add_argument(
        "--consistent", action="store_true", help="strongly consistent reads (twice the units)"
    )

    index = command(
        "reindex",
        "give items written before an index was added (or its keys re-declared) the index keys the "
        "model derives for them, reading the table by a paced scan; an item written meanwhile is left "
        "to its writer; --dry-run: count them, exit 1 if any",
        "hybridsync reindex --dry-run   (after a deploy that adds a GSI: then hybridsync reindex)",
        _reindex,
    )
    index.add_argument("--dry-run", action="store_true", help="count the out-of-date items, change nothing")
    index.add_argument("--table", help="one DynamoDB table (default: each of the model's, $TABLE_<NAME>)")
    scan_options(index, paced="read units, and as many write units,")

    keys = command(
        "distinct-keys",
        "list every partition key of a table, with what it cost",
        "hybridsync distinct-keys --by skip-scan --segments 4 --count",
        _distinct_keys,
    )
    keys.add_argument(
        "--by",
        choices=["index", "skip-scan", "scan"],
        default="index",
        help="the #static KEYS_ONLY index (default), a skip-scan, or a full scan",
    )
    keys.add_argument("--count", action="store_true", help="print the count and cost only")
    keys.add_argument("--table", help="DynamoDB table (default: the model's first, $TABLE_<NAME>)")
    scan_options(keys)

    cost = command(
        "cost",
        "read and write units of each access pattern for a workload, beside the naive way",
        "hybridsync cost distinct-keys --keys 2000000 --items-per-key 1000 --item-size 500",
        _cost,
    )
    cost.add_argument(
        "pattern",
        nargs="?",
        default="all",
        choices=["all", "distinct-keys", "time-range", "open-orders", "price-change", "order-lines",
                 "write-sharding", "scan"],
    )  # fmt: skip
    for flag, default, text in (
        ("--keys", 2_000_000, "item collections (distinct partition keys)"),
        ("--items-per-key", 1000, "items per collection"),
        ("--item-size", 500, "bytes per table item"),
        ("--index-entry-size", 150, "bytes per KEYS_ONLY index entry"),
        ("--days", 7, "days in the time range"),
        ("--items-per-day", 10_000, "orders per day"),
        ("--entry-size", 200, "bytes per index entry / order line"),
        ("--shards", 8, "shards of the time index"),
        ("--matching", 2_000, "open orders in the range"),
        ("--open-shards", 4, "shards of the open-orders index"),
        ("--static-size", 2731, "bytes of the static product part"),
        ("--small-size", 128, "bytes of the availability part"),
        ("--lines", 5, "lines per order"),
    ):
        cost.add_argument(flag, type=int, default=default, help=f"{text} (default {default})")
    cost.add_argument(
        "--table-gb", type=float, default=20.0, help="scan: the table's size in GB (default 20)"
    )
    cost.add_argument("--rate", type=float, default=DEFAULT_RATE,
                      help=f"scan: read units/s it is paced to (default {DEFAULT_RATE:g})")  # fmt: skip
    cost.add_argument("--reads-per-s", type=float, default=0.0, help="reads per second (units/s column)")
    cost.add_argument("--writes-per-s", type=float, default=0.0, help="writes per second (units/s column)")
    cost.add_argument("--json", action="store_true", help="one JSON list instead of the table")

    series = command(
        "timeseries",
        "rotate, list or query the tables of a time series the model declares (a table per period)",
        "hybridsync timeseries query --source dev-1 --from 2026-11-20 --to 2026-11-22",
        _timeseries,
    )
    series.add_argument("action", choices=["rotate", "list", "query"])
    series.add_argument("--at", help="rotate as of this time (default now), e.g. 2026-11-22T00:00:00Z")
    series.add_argument("--bucket", help="S3 bucket for archives (default $BUCKET_BODIES)")
    series.add_argument("--prefix", help="table name prefix (default $TIMESERIES_PREFIX or hybridsync)")
    series.add_argument("--series", help="the series' entity (default: the model's first series)")
    series.add_argument("--source", help="query: the partition key's value (an event source)")
    series.add_argument("--from", dest="start", help="query: first day or time (ISO-8601)")
    series.add_argument("--to", dest="end", help="query: last day or time (ISO-8601)")

    letters = command(
        "dead-letters",
        "list or redrive records a consumer rejected: the write-back's stream records (write_back), "
        "the aggregation's (aggregate) and the outbox rows the drain could not apply (sql_sync); a "
        "redrive applies the write-back's and the drain's again (after a fix to the data or the model)",
        "hybridsync dead-letters list --source sql_sync",
        _dead_letters,
    )
    letters.add_argument("action", choices=["list", "redrive"])
    letters.add_argument("--source", help="only this consumer's: write_back, aggregate or sql_sync")
    letters.add_argument("--id", type=int, action="append", help="only this id (repeatable)")
    letters.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")

    batches = command(
        "failed-batches",
        "list or redrive the stream batches a consumer gave up on (its on-failure queue)",
        "hybridsync failed-batches redrive   (after `source .local/env`)",
        _failed_batches,
    )
    batches.add_argument("action", choices=["list", "redrive"])
    batches.add_argument("--queue", action="append", help="queue URL (repeatable; default $FAILURE_QUEUES)")
    batches.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")

    ranked = command(
        "top",
        "the top items of a ranked aggregate in a day or month (its sparse, sharded GSI)",
        "hybridsync top Sales --day 2026-11-22 --n 10",
        _top,
    )
    ranked.add_argument("aggregate", help="the aggregate's name, as the model declares it")
    when = ranked.add_mutually_exclusive_group(required=True)
    when.add_argument("--day", help="YYYY-MM-DD")
    when.add_argument("--month", help="YYYY-MM")
    ranked.add_argument("--n", type=int, default=10, help="how many (1-100, default 10)")
    ranked.add_argument("--table", help="DynamoDB table (default: the aggregate's, $TABLE_<NAME>)")
    ranked.add_argument("--json", action="store_true", help="one JSON object instead of the table")

    command(
        "model",
        "print the model: tables, GSIs, entities, aggregates, time series",
        "hybridsync model",
        _model,
    )
    described = command(
        "openapi",
        "print the HTTP API's OpenAPI 3.1 document, generated from the project's routes (the API "
        "serves the same at /openapi.json)",
        "hybridsync openapi --out docs/openapi.json",
        _openapi,
    )
    described.add_argument("--out", type=Path, help="write it to this file instead of printing it")
    return top


def main(argv: list[str] | None = None) -> int:
    from botocore.exceptions import NoRegionError

    from hybridsync.settings import ConfigurationError

    args = parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a stored item's lone surrogate is shown escaped, not a crash
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        return args.run(args)
    except ConfigurationError as error:  # what the user can fix: one clear line, no traceback
        raise SystemExit(f"hybridsync {args.command}: {error}") from None
    except NoRegionError:
        raise SystemExit(
            f"hybridsync {args.command}: no AWS region: set AWS_REGION, or `source .local/env` "
            "for the local app"
        ) from None


if __name__ == "__main__":
    sys.exit(main())
