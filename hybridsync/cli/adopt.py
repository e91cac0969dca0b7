"""Adopting an existing system: the initial loads in both directions (`load views|items|rows`), the
aggregates rebuilt from existing data (`aggregates rebuild`), and the jobs they run as (`jobs`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hybridsync.cli import common
from hybridsync.cli.common import Commands, positive
from hybridsync.model import config
from hybridsync.runtime import db

LOAD_RATE = 1000.0  # write units/s a load is paced to unless told: a quarter of a new on-demand table's 4,000


def job_options(sub: argparse.ArgumentParser, paced: str) -> None:
    sub.add_argument(
        "--rate",
        type=float,
        default=LOAD_RATE,
        help=f"pace to this many {paced} per second across the job (default {LOAD_RATE:g}; 0: "
        "as fast as DynamoDB answers)",
    )
    sub.add_argument(
        "--segments",
        type=positive(int),
        default=4,
        help="work units: key ranges of a SQL table, scan segments of a DynamoDB table (default 4)",
    )
    sub.add_argument(
        "--concurrency", type=positive(int), help="units at work at once (default: --segments, at most 16)"
    )
    common.deployed_option(sub)
    sub.add_argument(
        "--resume", metavar="JOB", help="go on with a job a killed run left undone (`hybridsync jobs`)"
    )
    sub.add_argument(
        "--json", action="store_true", help="end with one JSON object: what was read, written, ..."
    )
    sub.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL; not needed with --deployed)")


def add_load(cli: Commands) -> None:
    load = cli.add(
        "load",
        "load existing data, online and resumable: `views` (PostgreSQL rows -> their DynamoDB views), "
        "`items ENTITY` (moving the master: legacy PostgreSQL rows -> versioned items), `rows` (DynamoDB "
        "items -> PostgreSQL, from a scan or an export); exit 1 if anything was dead-lettered or left undone",
        "hybridsync load views Customer --segments 8 --rate 2000",
        _load,
    )
    load.add_argument("direction", choices=["views", "items", "rows"])
    load.add_argument(
        "entities",
        nargs="*",
        metavar="ENTITY",
        help="views: entities mastered in PostgreSQL (default all); items: one mastered in DynamoDB; "
        "rows: written-back entities (default all)",
    )
    load.add_argument(
        "--from-export",
        metavar="S3_URL",
        help="rows: read a point-in-time export (s3://bucket/.../AWSDynamoDB/<export id>/), 0 read units",
    )
    load.add_argument("--page-limit", type=positive(int), help="rows: items per Scan request")
    job_options(load, "write units (rows: read units)")


def add_aggregates(cli: Commands) -> None:
    aggregates = cli.add(
        "aggregates",
        "rebuild the aggregates from the items the table holds, exactly once with the stream: the "
        "aggregation pauses for the rebuild (its mappings disabled, positions kept) and resumes after it",
        "hybridsync aggregates rebuild Sales --segments 4",
        _aggregates,
    )
    aggregates.add_argument("action", choices=["rebuild"])
    aggregates.add_argument("names", nargs="*", metavar="NAME", help="the aggregates (default all)")
    aggregates.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds between the scan's end and reading the stream's end (default 5)",
    )
    aggregates.add_argument(
        "--no-pause",
        action="store_true",
        help="do not pause the aggregation: its mappings are disabled already "
        "(-c pipeline_enabled=false, or by hand)",
    )
    job_options(aggregates, "read units")


def add_jobs(cli: Commands) -> None:
    listing = cli.add(
        "jobs",
        "list the loads and rebuilds, newest first: units done, rows read and written",
        "hybridsync jobs --json",
        _jobs,
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per job")


def _load(args: argparse.Namespace) -> int:
    from hybridsync.model.declare import Side

    model = config.model()
    entities = [_entity(model, n) for n in args.entities]
    if args.direction == "views":
        if stray := [e.name for e in entities if e.master is not Side.POSTGRESQL or not e.sql_table]:
            raise SystemExit(f"load views: {', '.join(stray)} not mastered in PostgreSQL")
        names = [e.name for e in entities] or [
            e.name for e in model.mastered_in(Side.POSTGRESQL) if e.sql_table
        ]
        if args.resume:
            names = names[:1]  # the job names its entity
        return _finish(args, [_job(args, "views", {"entity": n, "segments": args.segments}) for n in names])
    if args.direction == "items":
        if len(entities) != 1 or entities[0] not in model.written_back():
            raise SystemExit(
                "load items: name one entity mastered in DynamoDB with a SQL table, e.g. "
                + ", ".join(e.name for e in model.written_back())
            )
        return _finish(args, [_job(args, "items", {"entity": entities[0].name, "segments": args.segments})])
    spec = {"entities": [e.name for e in entities], "segments": args.segments, "page_limit": args.page_limit}
    if args.from_export:
        spec["export"] = args.from_export
    return _finish(args, [_job(args, "rows", spec)])


def _aggregates(args: argparse.Namespace) -> int:
    spec = {
        "aggregates": args.names,
        "segments": args.segments,
        "settle_s": args.settle,
        "no_pause": args.no_pause,
    }
    return _finish(args, [_job(args, "rebuild", spec)])


def _entity(model: Any, name: str) -> Any:
    try:
        return model.entity(name)
    except KeyError:
        raise SystemExit(
            f"no entity {name!r}; the model's: {', '.join(e.name for e in model.entities)}"
        ) from None


def _finish(args: argparse.Namespace, outcomes: list[Any]) -> int:
    """With --json, one object last (a command that ran several jobs adds their figures up); exit 1
    when anything was dead-lettered or left undone."""
    from hybridsync.sync.jobs import Counts, Outcome

    total = Counts()
    for outcome in outcomes:
        total.add(outcome.counts)
    combined = Outcome(",".join(o.job for o in outcomes), total, sum(o.units for o in outcomes),
                       sum(o.undone for o in outcomes), sum(o.seconds for o in outcomes),
                       [e for o in outcomes for e in o.errors])  # fmt: skip
    if args.json:
        print(json.dumps(combined.as_json()))
    return 1 if total.dead_lettered or combined.undone else 0


def _job(args: argparse.Namespace, kind: str, spec: dict[str, Any]) -> Any:
    from hybridsync.dynamodb.scans import Pacer
    from hybridsync.runtime import aws
    from hybridsync.sync import jobs, loads, operations, rebuild  # noqa: F401 - loads, rebuild: their kinds of job
    from hybridsync.sync.jobs import JobError, JobStore, Services

    model, tables = config.model(), common.tables()
    store = JobStore(aws.client("dynamodb"), model, tables)
    concurrency = args.concurrency or min(args.segments, 16)
    rate = args.rate or None
    try:
        if args.deployed is not None:
            call = operations.deployed(common.operations_function(args.deployed), aws.client("lambda"))
            job = args.resume or call({"operation": "plan", "kind": kind, "spec": spec})["job"]
            invoke = operations.remote_invoke(call, rate / concurrency if rate else None)
        else:
            engine = db.create_engine(common.database_url(args), pool_size=concurrency + 1)
            services = Services(aws.client("dynamodb"), engine, model, tables, aws.client, Pacer(rate))
            job = args.resume or jobs.start(services, kind, spec)
            invoke = jobs.in_process(services)
        header = store.header(job)
    except (JobError, ValueError, RuntimeError) as error:
        raise SystemExit(f"hybridsync {args.command}: {error}") from None
    if header["Kind"] != kind:
        raise SystemExit(f"--resume: {job} is a {header['Kind']} job, not a {kind} one")
    outcome = _with_progress(store, job, header, invoke, concurrency)
    counts = outcome.counts
    print(
        f"job {job}: {outcome.units - outcome.undone}/{outcome.units} unit(s) done in "
        f"{outcome.seconds:.1f}s: "
        f"{counts.read:,} read, {counts.written:,} written, {counts.older:,} skipped as older, "
        f"{counts.skipped:,} left alone, {counts.dead_lettered:,} dead-lettered"
    )
    for error in outcome.errors:
        print(f"  {error}")
    if outcome.undone:
        print(f"  resume with: hybridsync {_resume_command(args, job)}")
    if counts.dead_lettered:
        print("  the dead letters: hybridsync dead-letters list --source load")
    return outcome


def _resume_command(args: argparse.Namespace, job: str) -> str:
    what = f"load {args.direction}" if args.command == "load" else "aggregates rebuild"
    return f"{what} --resume {job}" + (" --deployed" if args.deployed is not None else "")


def _with_progress(store: Any, job: str, header: dict[str, Any], invoke: Any, concurrency: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hybridsync.sync import jobs

    total = header["Spec"].get("rows")
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(f"{header['Kind']} {job}", total=total)

        def advance(counts: Any) -> None:
            progress.advance(task, counts.read)

        return jobs.run(store, job, invoke, concurrency=concurrency, progress=advance)


def _jobs(args: argparse.Namespace) -> int:
    from hybridsync.runtime import aws
    from hybridsync.sync.jobs import JobStore

    listed = JobStore(aws.client("dynamodb"), config.model(), common.tables()).jobs()
    if args.json:
        for job in listed:
            print(json.dumps(job, default=str))
        return 0
    print(
        f"{'job':34} {'kind':8} {'units':>9} {'read':>10} {'written':>10} {'older':>8} {'dead':>6}  created"
    )
    for job in listed:
        c = job["counts"]
        print(
            f"{job['job']:34} {job['kind']:8} {job['done']:>4}/{job['units']:<4} {c['read']:>10,} "
            f"{c['written']:>10,} {c['older']:>8,} {c['dead_lettered']:>6,}  {job['created']}"
        )
        for error in job["errors"][:3]:
            print(f"  {error}")
    print(f"{len(listed)} job(s)")
    return 0
