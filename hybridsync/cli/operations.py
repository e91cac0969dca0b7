"""Operations: both sides compared and repaired (`reconcile`), index keys brought up to date
(`reindex`), what a consumer rejected or gave up on (`dead-letters`, `failed-batches`), the tables
of a time series (`timeseries`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from hybridsync.cli import common
from hybridsync.cli.common import Commands, scan_options
from hybridsync.model import config
from hybridsync.runtime import db


def add_reconcile(cli: Commands) -> None:
    check = cli.add(
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
    common.deployed_option(check)


def _reconcile(args: argparse.Namespace) -> int:
    from hybridsync.dynamodb import exports
    from hybridsync.runtime import aws
    from hybridsync.sync.reconcile import Drift, reconcile

    if args.deployed is not None:
        answer = common.deployed(args, {"operation": "reconcile", "repair": args.repair})
        return _report(args, {name: Drift(**drift) for name, drift in answer.items()})

    engine = db.create_engine(common.database_url(args))
    tables = {name: args.table for name in common.tables()} if args.table else common.tables()
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
    with common.scanning(
        f"reading {', '.join(exported[t].url if t in exported else t for t in read)}"
    ) as progress:

        def scanner(table: str) -> Any:
            scanners.append(exports.ExportReader(s3, exported[table]) if table in exported
                            else common.scanner(args, table, progress))  # fmt: skip
            return scanners[-1]

        report = reconcile(
            aws.client("dynamodb"), tables, engine, config.model(), repair=args.repair, scanner=scanner
        )
    for scanned in scanners:
        if isinstance(scanned, exports.ExportReader):
            print(f"{scanned.table_name}: read from the export, not the table (0 read units)")
        else:
            print(f"{scanned.table_name}: " + common.spent(scanned.cost))
    return _report(args, report)


def _report(args: argparse.Namespace, report: dict[str, Any]) -> int:
    print(f"{'entity':12} {'checked':>8} {'missing':>8} {'stale':>6} {'extra':>6} {'unmappable':>10}")
    for name, drift in report.items():
        print(
            f"{name:12} {drift.checked:8} {len(drift.missing):8} {len(drift.stale):6} "
            f"{len(drift.extra):6} {len(drift.unmappable):10}"
        )
        for label in ("missing", "stale", "extra"):
            if keys := getattr(drift, label):
                print(f"  {label}: {common.show_keys(keys)}")
        if drift.extra and not args.repair:  # no item: deleted in DynamoDB, or older than hybridsync
            print(f"  extra rows that predate hybridsync become items with `hybridsync load items {name}`; "
                  "--repair tombstones them")  # fmt: skip
        for label in ("unmappable", "unrepaired"):
            for problem in getattr(drift, label)[:10]:
                print(f"  {label}: {problem}")
    drifted = sum(d.total for d in report.values())
    if args.repair and drifted:
        unrepaired = sum(len(d.unrepaired) for d in report.values())
        print(f"repaired {drifted - unrepaired} row(s) from DynamoDB, {unrepaired} refused by PostgreSQL")
        return 1 if unrepaired else 0
    return 1 if drifted else 0


def add_reindex(cli: Commands) -> None:
    index = cli.add(
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


def _reindex(args: argparse.Namespace) -> int:
    from hybridsync.dynamodb.reindex import reindex
    from hybridsync.runtime import aws

    tables = [args.table] if args.table else sorted(set(common.tables().values()))
    client, out_of_date, failed = aws.client("dynamodb"), 0, 0
    for table in tables:
        with common.scanning(f"reading {table}") as progress:
            scanner = common.scanner(args, table, progress)
            report = reindex(client, table, common.declared(table), config.model(), scanner.items(),
                             dry_run=args.dry_run, rate=args.rate or None)  # fmt: skip
        print(f"{table}: " + common.spent(scanner.cost))
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


def add_timeseries(cli: Commands) -> None:
    series = cli.add(
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


def _timeseries(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from hybridsync.dynamodb import timeseries
    from hybridsync.runtime import aws, settings

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
        bucket = common.given(args.bucket, "BUCKET_BODIES", "bucket for archives", "--bucket")
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


def add_dead_letters(cli: Commands) -> None:
    letters = cli.add(
        "dead-letters",
        "list or redrive records a consumer rejected: the write-back's stream records (write_back), "
        "the aggregation's (aggregate), the outbox rows the drain could not apply (sql_sync) and the "
        "rows and items a load could not carry (load); a redrive applies the write-back's and the "
        "drain's again (after a fix to the data or the model). The others are not redriven: after the "
        "fix, run the same `hybridsync load` again (a load's), or `hybridsync aggregates rebuild` (the "
        "aggregation's)",
        "hybridsync dead-letters list --source sql_sync",
        _dead_letters,
    )
    letters.add_argument("action", choices=["list", "redrive"])
    letters.add_argument(
        "--source",
        help="only this consumer's: write_back, aggregate, sql_sync or load (redrive: "
        "write_back or sql_sync)",
    )
    letters.add_argument("--id", type=int, action="append", help="only this id (repeatable)")
    letters.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")
    common.deployed_option(letters)


REDRIVE_REFUSED = (
    "redrive applies the sources write_back and sql_sync, not {source}: after the fix, a load's dead "
    "letters are carried by running the same `hybridsync load` again, the aggregation's by "
    "`hybridsync aggregates rebuild`"
)


def _dead_letters(args: argparse.Namespace) -> int:
    from hybridsync.sql import deadletters
    from hybridsync.sync import outbox, writeback

    if args.action == "redrive" and args.source not in (None, writeback.SOURCE, outbox.SOURCE):
        raise SystemExit(REDRIVE_REFUSED.format(source=args.source))
    if args.deployed is not None and args.action == "redrive":
        event = {"operation": "redrive", "what": "dead-letters", "source": args.source, "ids": args.id}
        answer = common.deployed(args, event)
        print(f"redriven: {answer['landed']} landed, {len(answer['still'])} still rejected")
        for letter in answer["still"]:
            print(f"  {letter['id']}: {letter['reason']}")
        return 1 if answer["still"] else 0
    engine = db.create_engine(common.database_url(args))
    if args.action == "list":
        with engine.connect() as conn:
            rows = deadletters.pending(conn, args.source, args.id)
        for row in rows:
            record = row.record if isinstance(row.record, dict) else {}
            event = record.get("eventName") or record.get("operation") or "?"
            print(f"{row.id:6} {row.created_at:%Y-%m-%d %H:%M:%S} {row.source:10} {event:7} {row.reason}")
        print(f"{len(rows)} pending dead letter(s)")
        return 0
    landed, still = 0, []
    from hybridsync.runtime import aws

    if args.source in (None, writeback.SOURCE):
        truth = writeback.Truth(aws.client("dynamodb"), common.tables())
        landed, still = writeback.redrive(engine, config.model(), args.id, truth=truth)
    if args.source in (None, outbox.SOURCE):
        views = outbox.redrive(engine, aws.client("dynamodb"), config.model(), common.tables(), args.id)
        landed, still = landed + views[0], still + views[1]
    print(f"redriven: {landed} landed, {len(still)} still rejected")
    for letter in still:
        print(f"  {letter.record.get('eventID') or letter.record.get('outbox_id', '?')}: {letter.reason}")
    return 1 if still else 0


def add_failed_batches(cli: Commands) -> None:
    batches = cli.add(
        "failed-batches",
        "list or redrive the stream batches a consumer gave up on (stored with their records in the "
        "stack's failure bucket)",
        "hybridsync failed-batches redrive   (after `source .local/env`)",
        _failed_batches,
    )
    batches.add_argument("action", choices=["list", "redrive"])
    batches.add_argument(
        "--store",
        action="append",
        metavar="BUCKET|QUEUE_URL",
        help="where the batches are (repeatable; default $FAILED_BATCHES_BUCKET, the stack's "
        "FailedBatchesBucketName output); an SQS queue's URL for a destination of your own",
    )
    batches.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")
    common.deployed_option(batches)


def _failed_batches(args: argparse.Namespace) -> int:
    from hybridsync.runtime import aws
    from hybridsync.sync import failed

    if args.deployed is not None and args.action == "redrive":
        answer = common.deployed(args, {"operation": "redrive", "what": "failed-batches"})
        print(f"redriven: {answer['batches']} batch(es), {answer['records']} record(s), {answer['applied']} "
              f"changed something; {len(answer['left'])} left where they are")  # fmt: skip
        for left in answer["left"]:
            print(f"  {left}")
        return 1 if answer["left"] else 0
    places = args.store or [b for b in [os.environ.get("FAILED_BATCHES_BUCKET")] if b]
    if not places:
        raise SystemExit(
            "no failure bucket: pass --store BUCKET (the pipeline stack's FailedBatchesBucketName output) or "
            "set FAILED_BATCHES_BUCKET (e.g. `source .local/env`)"
        )
    stores = [failed.store_at(place, aws.client) for place in places]
    if args.action == "list":
        batches = [b for store in stores for b in store.pending()]
        for b in batches:
            kept = "records kept" if b.records is not None else "in the stream only"
            print(f"{b.at[:19]:19} {b.consumer or '?':10} {b.condition:24} {b.size:5} record(s) "
                  f"{b.shard} {b.first}..{b.last} ({kept})")  # fmt: skip
        print(f"{len(batches)} failed batch(es), {sum(b.size for b in batches)} record(s)")
        return 0
    engine = db.create_engine(common.database_url(args))
    done = failed.redrive(
        stores,
        aws.client("dynamodbstreams"),
        client=aws.client("dynamodb"),
        tables=common.tables(),
        engine=engine,
        model=config.model(),
    )
    print(
        f"redriven: {done.batches} batch(es), {done.records} record(s), {done.applied} changed something "
        f"(the rest were applied already); {len(done.left)} left where they are"
    )
    for batch, why in done.left:
        print(f"  {batch.consumer or '?'} {batch.shard} {batch.first}..{batch.last}: {why}")
    return 1 if done.left else 0


def add_dashboard(cli: Commands) -> None:
    dashboard = cli.add(
        "dashboard",
        "print the deployed dashboard's URL (lag, throughput, errors, failed batches, dead letters, the "
        "outbox, capacity per table and GSI, the database) and the alarm topic",
        "hybridsync dashboard --stack HybridSync-monitoring",
        _dashboard,
    )
    dashboard.add_argument("--stack", help="the monitoring stack (default: <prefix>-monitoring, the prefix "
                           "of cdk.json's context)")  # fmt: skip


def _dashboard(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    stack = args.stack or f"{common.project_prefix()}-monitoring"
    try:
        url, topic = common.stack_output(stack, "DashboardUrl", "AlarmTopicArn")
    except (BotoCoreError, ClientError) as error:
        raise SystemExit(
            f"hybridsync dashboard: {stack}: {error} (deployed? the right account and region?)"
        ) from None
    if url is None:
        raise SystemExit(f"hybridsync dashboard: {stack} has no DashboardUrl output (a monitoring stack's)")
    print(url)
    if topic:
        print(f"alarms go to {topic}")
    return 0
