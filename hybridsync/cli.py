"""The `hybridsync` command line: bring up the local stack, migrate the schema, show the model."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from hybridsync import db, migrations
from hybridsync.model import MODEL


def _up(args: argparse.Namespace) -> int:
    import threading

    from hybridsync import local
    from hybridsync.local.app import LocalApp
    from hybridsync.local.template import Assembly, synth_if_stale
    from hybridsync.sync import outbox

    started = time.monotonic()
    state = Path(args.state_dir)
    assembly = Assembly.load(synth_if_stale(Path(args.assembly), synth=not args.no_synth))
    with local.start(state, args.prefix, tables=False) as stack:
        app = LocalApp(assembly, dynamodb_endpoint=stack.dynamodb_endpoint, database_url=stack.database_url,
                       state_dir=state, prefix=args.prefix)  # fmt: skip
        stop = threading.Event()
        drain_args = (stack.database_url, stack.client(), app.tables["MainTable"], stop)
        drainer = threading.Thread(target=outbox.listen_and_drain, args=drain_args, daemon=True)
        status_file = state / "status.json"
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with Ctrl-C ignored
        try:
            app.start(http_port=args.port)
            drainer.start()
            stack.table_names = {c.removesuffix("Table").lower(): name for c, name in app.tables.items()}
            stack.bucket_names = {c.removesuffix("Bucket").lower(): name for c, name in app.buckets.items()}
            env_file = state / "env"
            env_file.write_text("".join(f"export {k}={v!r}\n" for k, v in stack.environment().items()))
            took = time.monotonic() - started
            print(f"hybridsync: the app of {args.assembly}/ running locally, up in {took:.1f}s")
            _banner(stack, app, env_file)
            if args.demo:
                from rich.console import Console

                from hybridsync import db
                from hybridsync.local import demo

                engine = db.create_engine(stack.database_url)
                figures = demo.run(app, engine, state, Console())
                engine.dispose()
                if args.once:
                    good = (
                        figures["caught_up"] and not figures["drift"] and figures["aggregates_equal_recount"]
                    )
                    return 0 if good else 1
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
            drainer.join(timeout=10)
            status_file.unlink(missing_ok=True)
    return 0


def _banner(stack: Any, app: Any, env_file: Path) -> None:
    def origin(service: str) -> str:
        return "embedded" if service in stack.embedded else "from the environment"

    print(f"  DynamoDB   {stack.dynamodb_endpoint}  ({origin('dynamodb')})")
    print(f"  PostgreSQL {stack.database_url}  ({origin('postgresql')})")
    print(f"  schema     alembic revision {migrations.current_revision(stack.database_url)}")
    for name in app.tables.values():
        description = app.client.describe_table(TableName=name)["Table"]
        stream = description.get("StreamSpecification", {}).get("StreamViewType")
        print(f"  table      {name}: {len(description.get('GlobalSecondaryIndexes', []))} GSIs"
              + (f", stream {stream}" if stream else ""))  # fmt: skip
    for name, function in app.functions.items():
        print(f"  function   {name}: {function.handler}, timeout {function.timeout_s:.0f}s, "
              f"{function.memory_mb} MB, from {function.asset.name[:18]}...")  # fmt: skip
    for poller in app.pollers:
        s = poller.settings
        extras = [f"tumbling {s.tumbling_window_s}s" if s.tumbling_window_s else "",
                  "bisect" if s.bisect else "", "partial failures" if s.report_failures else ""]  # fmt: skip
        print(
            f"  mapping    {s.name}: batch {s.batch_size}, window {s.batching_window_s:g}s, "
            f"{len(s.patterns)} filters, {s.max_retries} retries, " + ", ".join(e for e in extras if e)
        )
    if app.http is not None:
        print(
            f"  HTTP API   http://127.0.0.1:{app.http.server_address[1]}/  (IAM authorization is NOT "
            "enforced locally)"
        )
    for name in app.queues:
        print(f"  queue      {name} (failed batches)")
    for name in app.buckets.values():
        print(f"  bucket     {name} (S3 on the DynamoDB endpoint)")
    print("  outbox     PostgreSQL changes reach DynamoDB on NOTIFY, and on the drain's schedule")
    print(f"  env        source {env_file}  (for other shells and tools); `hybridsync status` for lag")


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
        print(f"{name:<26} {m['position'] or '-':>24} {m['delivered']:>9} {m['lag_records']:>7} "
              f"{m['lag_s']:>7.1f} {m['sent_to_failure_queue']:>6}  {m['last_error'] or '-'}")  # fmt: skip
    print(f"{'function':<26} {'invocations':>11} {'errors':>7} {'cold':>5}  last error")
    for name, f in status["functions"].items():
        error = f["last_error"] or "-"
        print(f"{name:<26} {f['invocations']:>11} {f['errors']:>7} {f['cold_starts']:>5}  {error}")
    for name, count in status["failure_queues"].items():
        print(f"queue {name}: {count} message(s)")
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from hybridsync.local.app import LocalApp
    from hybridsync.local.functions import FunctionError
    from hybridsync.local.template import Assembly, synth_if_stale

    assembly = Assembly.load(synth_if_stale(Path(args.assembly), synth=not args.no_synth))
    app = LocalApp(assembly, dynamodb_endpoint=_given(None, "DYNAMODB_ENDPOINT", "DynamoDB", "(no flag)"),
                   database_url=_given(None, "DATABASE_URL", "database", "(no flag)"),
                   state_dir=Path(args.state_dir), prefix=args.prefix)  # fmt: skip
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


def _db(args: argparse.Namespace) -> int:
    url = _database_url(args)
    if args.action == "upgrade":
        migrations.upgrade(url, args.revision or "head")
    elif args.action == "downgrade":
        if not args.revision:
            raise SystemExit("downgrade needs a revision, e.g. `hybridsync db downgrade base`")
        migrations.downgrade(url, args.revision)
    print(f"schema at revision {migrations.current_revision(url)}")
    return 0


def _table_name(args: argparse.Namespace) -> str:
    return _given(args.table, "TABLE_MAIN", "table", "--table")


def _show_keys(keys: list, limit: int = 10) -> str:
    shown = ", ".join("/".join(map(str, k)) for k in keys[:limit])
    return shown + (f" ... (+{len(keys) - limit})" if len(keys) > limit else "")


def _reconcile(args: argparse.Namespace) -> int:
    from hybridsync import aws
    from hybridsync.sync.reconcile import reconcile

    engine = db.create_engine(_database_url(args))
    report = reconcile(aws.client("dynamodb"), _table_name(args), engine, repair=args.repair)
    print(f"{'entity':12} {'checked':>8} {'missing':>8} {'stale':>6} {'extra':>6} {'unmappable':>10}")
    for name, drift in report.items():
        print(f"{name:12} {drift.checked:8} {len(drift.missing):8} {len(drift.stale):6} "
              f"{len(drift.extra):6} {len(drift.unmappable):10}")  # fmt: skip
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


def _dead_letters(args: argparse.Namespace) -> int:
    from hybridsync import deadletters
    from hybridsync.sync import writeback

    engine = db.create_engine(_database_url(args))
    if args.action == "list":
        with engine.connect() as conn:
            rows = deadletters.pending(conn, args.source, args.id)
        for row in rows:
            event = row.record.get("eventName", "?") if isinstance(row.record, dict) else "?"
            print(f"{row.id:6} {row.created_at:%Y-%m-%d %H:%M:%S} {row.source:10} {event:7} {row.reason}")
        print(f"{len(rows)} pending dead letter(s)")
        return 0
    if args.source not in (None, writeback.SOURCE):
        raise SystemExit(f"redrive knows the sources: {writeback.SOURCE}")
    landed, still = writeback.redrive(engine, args.id)
    print(f"redriven: {landed} landed, {len(still)} still rejected")
    for letter in still:
        print(f"  {letter.record.get('eventID', '?')}: {letter.reason}")
    return 1 if still else 0


def _top_sellers(args: argparse.Namespace) -> int:
    from hybridsync import aws
    from hybridsync.reads import rankings

    try:
        period = rankings.period_of(args.day, args.month)
        rows = rankings.top_sellers(aws.client("dynamodb"), _table_name(args), period, args.n)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    print(f"top {args.n} products by units, {period}")
    for place, row in enumerate(rows, 1):
        print(f"{place:4}. {row['ProductId']:30} {int(row['Units']):>8} units {row['Revenue']:>12} revenue")
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from hybridsync import aws
    from hybridsync.reads import rankings

    client, table = aws.client("dynamodb"), _table_name(args)
    try:
        rows = rankings.leaderboard(client, table, args.top)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    for place, row in enumerate(rows, 1):
        print(f"{place:4}. {row['PlayerId']:30} {int(row['Score']):>10}")
    if args.player:
        view = rankings.player(client, table, args.player, neighbours=2)
        if view is None:
            raise SystemExit(f"no score for player {args.player!r}")
        print(f"\n{args.player}: score {view['Score']}, rank {view['Rank']}")
        for label in ("Above", "Below"):
            for row in view[label]:
                print(f"  {label.lower():5} {row['PlayerId']:30} {int(row['Score']):>10}")
    return 0


def _model(_: argparse.Namespace) -> int:
    for table in MODEL.tables:
        keys = " + ".join(a.name for a in table.key_schema())
        print(f"table {table.name} ({keys}): {table.purpose}")
        for index in table.indexes:
            keys = " + ".join(a.name for a in (index.partition, index.sort) if a)
            sharded = {e.name: e.shards(index.partition.name) for e in MODEL.entities}
            shards = ", ".join(f"{name} in {n} shards" for name, n in sharded.items() if n > 1)
            print(
                f"  GSI {index.name} ({keys}, {index.projection}{', ' + shards if shards else ''}): "
                f"{index.purpose}"
            )
    print("entities:")
    for entity in MODEL.entities:
        sql = f" <-> SQL {entity.sql_table}" if entity.sql_table else ""
        print(f"  {entity.name:20} {entity.table.name:7} mastered in {entity.master}{sql}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="hybridsync", description=__doc__, epilog="example: hybridsync up   (then, in another shell: "
        "source .local/env && hybridsync reconcile)", formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    commands = top.add_subparsers(dest="command", required=True)

    def command(name: str, summary: str, example: str, run: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=summary, epilog=f"example: {example}")
        sub.set_defaults(run=run)
        return sub

    up = command("up", "run the synthesized app locally: tables, functions, stream mappings, HTTP API, "
                 "schedules", "hybridsync up --demo --port 8080", _up)  # fmt: skip
    up.add_argument("--once", action="store_true", help="set everything up, print (run the demo), and stop")
    up.add_argument(
        "--demo",
        action="store_true",
        help="drive a realistic workload through the app, then report (also .local/report.html)",
    )
    up.add_argument("--port", type=int, default=0, help="HTTP API port on 127.0.0.1 (default: a free one)")
    status = command("status", "what the running app's mappings and functions are doing",
                     "hybridsync status", _status)  # fmt: skip
    invoke = command("invoke", "invoke one function of the app with one event",
                     "hybridsync invoke write_back --event tests/events/order_insert.json",
                     _invoke)  # fmt: skip
    invoke.add_argument("function", help="the function's construct id (WriteBack or write_back, ...)")
    invoke.add_argument("--event", help="a JSON file holding the event (default {})")
    for sub in (up, status, invoke):
        sub.add_argument("--state-dir", default=".local", help="where local state lives (default .local)")
    for sub in (up, invoke):
        sub.add_argument("--prefix", default="hybridsync", help="table name prefix (default hybridsync)")
        sub.add_argument("--assembly", default="cdk.out", help="the synthesized app (default cdk.out)")
        sub.add_argument("--no-synth", action="store_true", help="use the assembly as it is, even if stale")

    migrate = command("db", "migrate the PostgreSQL schema (Alembic)", "hybridsync db upgrade", _db)
    migrate.add_argument("action", choices=["upgrade", "downgrade", "current"])
    migrate.add_argument("revision", nargs="?", help="target revision (default head for upgrade)")
    migrate.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")

    check = command("reconcile", "compare written-back entities in DynamoDB with PostgreSQL; exit 1 on drift",
                    "hybridsync reconcile --repair", _reconcile)  # fmt: skip
    check.add_argument("--repair", action="store_true", help="re-apply DynamoDB's state to PostgreSQL")
    check.add_argument("--table", help="DynamoDB table (default $TABLE_MAIN)")
    check.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")

    letters = command("dead-letters", "list or redrive records a consumer rejected",
                      "hybridsync dead-letters list --source write_back", _dead_letters)  # fmt: skip
    letters.add_argument("action", choices=["list", "redrive"])
    letters.add_argument("--source", help="only this consumer's (e.g. write_back)")
    letters.add_argument("--id", type=int, action="append", help="only this id (repeatable)")
    letters.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")

    sellers = command("top-sellers", "top products of a day or month (sparse GSI)",
                      "hybridsync top-sellers --day 2026-11-22 --n 10", _top_sellers)  # fmt: skip
    when = sellers.add_mutually_exclusive_group(required=True)
    when.add_argument("--day", help="YYYY-MM-DD")
    when.add_argument("--month", help="YYYY-MM")
    sellers.add_argument("--n", type=int, default=10, help="how many (1-100, default 10)")
    sellers.add_argument("--table", help="DynamoDB table (default $TABLE_MAIN)")

    board = command("leaderboard", "top players, and one player's rank and neighbours",
                    "hybridsync leaderboard --top 10 --player c-42", _leaderboard)  # fmt: skip
    board.add_argument("--top", type=int, default=10, help="how many (1-100, default 10)")
    board.add_argument("--player", help="also show this player's score, rank and neighbours")
    board.add_argument("--table", help="DynamoDB table (default $TABLE_MAIN)")

    command("model", "print the tables, GSIs and entities", "hybridsync model", _model)
    return top


def main(argv: list[str] | None = None) -> int:
    from hybridsync.settings import ConfigurationError

    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ConfigurationError as error:  # what the user can fix: one clear line, no traceback
        raise SystemExit(f"hybridsync {args.command}: {error}") from None


if __name__ == "__main__":
    sys.exit(main())
