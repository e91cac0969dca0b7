"""Scale: the local app on streams shaped as production's (hybridsync.local.dynamodb.models), the same
workload at 1, 4 and 16 shards, side by side in one run.

Each shard count runs the shop's demo workload (hot products by a Zipf-like law, hot customers,
orders edited, cancelled and deleted, poison records) through its own copy of the app: every shard
sealed and continued by a child every 20 s or once it holds 4 x orders / shards records (so a fast
machine's short run rolls over too), one split mid-run, transaction conflicts injected on
hot aggregate items written from two shards at once (with duplicate deliveries), PostgreSQL capped
at a `max_connections` tighter than a small Aurora's. Then every check: rows lost, duplicated or
stale, drift, aggregates against a recount; conflicts injected and retried in place, batches that
failed because of one; rollovers; the aggregation's bookkeeping left; PostgreSQL's peak client
connections; statements that would pin an RDS Proxy connection (tests/integration/test_pinning.py's
check, over everything the functions sent, read from PostgreSQL's statement log); lag p99.

On two cores more shards are not faster (16 shards are 16 pollers and up to 32 function processes
sharing them): the point is that correctness and the bounds hold as production's topology grows.

Prints a table, then one JSON line: shards, changes, lost, duplicated, stale, drift,
conflicts_injected, conflicts_retried, batches_failed_by_conflict, rollovers (and
rollovers_per_shard_count), cursor_items_end,
pg_connections_peak, pg_connection_cap, pinning_statements, lag_p99_s (per shard count).

Usage: python bench/scale.py [--quick | --smoke]   (--quick: under 5 minutes; --smoke: 2 and 4
shards with a 4 s lifetime, seconds, the same code path and JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from hybridsync import local, workloads  # noqa: E402
from hybridsync.local import faults  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.faults import FaultPlan  # noqa: E402
from hybridsync.local.template import Assembly, synth_if_stale  # noqa: E402
from hybridsync.model import config  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.sync.aggregate import Aggregation  # noqa: E402
from hybridsync.sync.outbox import PINS_ON_PURPOSE  # noqa: E402
from shop_workloads import demo  # noqa: E402
from tests.integration.test_pinning import PINNING  # noqa: E402

PG_CONNECTION_CAP = 64  # max_connections; Aurora Serverless v2 at its smallest allows more


def peak_connections(url: str, stop: threading.Event, peak: list[int]) -> None:
    engine = db.create_engine(url, pool_size=1, max_overflow=0)
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
    while not stop.wait(0.25):
        try:
            with engine.connect() as conn:
                peak[0] = max(peak[0], conn.execute(query).scalar_one())
        except sa.exc.OperationalError:
            pass  # at the cap: the next sample sees it
    engine.dispose()


def statements_logged(log_dir: Path, since: int) -> list[str]:
    """Every statement the functions sent, as PostgreSQL logged it (`log_statement = all`) after
    byte `since` of its log: every connection's but this benchmark's own (named `bench`; the
    local outbox drain's LISTEN, which stands in for the scheduled drain, is among them)."""
    text = "".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("*.log")))[since:]
    entries = re.split(r"\n(?!\t)", text)
    found = []
    for entry in entries:
        app, _, rest = entry.partition("|")
        matched = re.search(r"LOG:\s+(?:statement|execute [^:]*): (.*)", rest, re.DOTALL)
        if matched and app != "bench":
            found.append(matched[1])
    return found


def below(a: Any, b: Any) -> bool:
    """An aggregate's stored measures under its recount's (a loss), or over (a double count)."""
    return sum(a or ()) < sum(b or ())


def conflicts_retried(state_dir: Path) -> int:
    log = state_dir / "logs" / "Aggregate.log"
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    return sum(json.loads(line).get("conflicts_retried", 0) for line in lines
               if '"batch aggregated"' in line)  # fmt: skip


def logged_postgres(data_dir: Path) -> tuple[str, Any]:
    """An embedded PostgreSQL capped at PG_CONNECTION_CAP connections that logs every statement
    with its connection's application name (`statements/`)."""
    url, stop = local.start_postgres(data_dir, PG_CONNECTION_CAP)
    with sa.create_engine(db.sqlalchemy_url(url), isolation_level="AUTOCOMMIT").connect() as c:
        for setting in ("logging_collector = on", "log_directory = 'statements'", "log_statement = 'all'",
                        "log_line_prefix = '%a|'"):  # fmt: skip
            c.execute(sa.text(f"ALTER SYSTEM SET {setting}"))
    stop()
    return local.start_postgres(data_dir, PG_CONNECTION_CAP)  # the collector starts with the server


def records_per_shard(work: demo.Workload, shards: int) -> int:
    """Records after which a shard rolls over, whatever the machine's speed: the workload makes
    over a dozen stream records per order (its lines, header, edits, and the aggregate items they
    update), spread over the shards, so each shard rolls over a few times in a run."""
    return max(10, 4 * work.orders // shards)


def run_one(assembly_dir: Path, stack: local.LocalStack, state: Path, shards: int, lifetime_s: float,
            work: demo.Workload) -> dict[str, Any]:  # fmt: skip
    log_dir = state / "postgres" / "statements"
    assembly = Assembly.load(assembly_dir)
    for mapping in assembly.resources("AWS::Lambda::EventSourceMapping"):  # small batches interleave
        mapping.properties.update(BatchSize=50, MaximumBatchingWindowInSeconds=1)
    plan = FaultPlan(seed=20261123 + shards, duplicate=0.1, conflict=0.5)
    app = LocalApp(assembly, **stack.endpoints(), state_dir=state, prefix=f"scale{shards}", faults=plan,
                   shards=shards, shard_lifetime_s=lifetime_s,
                   shard_records=records_per_shard(work, shards))  # fmt: skip
    engine = db.create_engine(stack.database_url)
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=peak_connections, args=(stack.database_url, stop, peak), daemon=True)
    logged = sum(p.stat().st_size for p in log_dir.glob("*.log"))
    splitter = threading.Timer(lifetime_s * 1.5, lambda: app.split("main"))
    try:
        app.start(http_port=0, schedules={"SqlSync"})  # the outbox drain's schedule alone
        sampler.start()
        splitter.start()
        figures = demo.run(app, engine, state, Console(quiet=True), work, timeout_s=300)
        status = app.status()
        verdict = workloads.verify(app.client, app.table_names, engine, config.model())
        table = app.table_names["main"]
        bookkeeping = Aggregation(config.model(), "main").bookkeeping_counts(app.client, table)
    finally:
        splitter.cancel()
        app.stop()
        stop.set()
        sampler.join(timeout=5)
        engine.dispose()
    differences = verdict.aggregate_differences().values()
    injected = faults.injected(state, figures["faults_injected"])
    sent = [s for s in statements_logged(log_dir, logged) if "pg_stat_activity" not in s]
    return {
        "shards": shards,
        "changes": figures["writes"],
        "lost": sum(len(d.missing) for d in verdict.drifts) + sum(1 for s, r in differences if below(s, r)),
        "duplicated": sum(len(d.extra) for d in verdict.drifts) + sum(1 for s, r in differences if below(r, s)),  # noqa: E501
        "stale": sum(len(d.stale) for d in verdict.drifts),
        "drift": figures["drift"],
        "aggregates_equal_recount": figures["aggregates_equal_recount"],
        "caught_up": figures["caught_up"],
        "conflicts_injected": injected.get("conflict", 0),
        "conflicts_retried": conflicts_retried(state),
        "batches_failed_by_conflict": status["functions"]["Aggregate"]["errors_by_type"].get(
            "TransactionCanceledException", 0),
        "rollovers": status["streams"][table]["rollovers"],
        "shards_created": status["streams"][table]["shards"] + status["streams"][table]["deleted_shards"],
        "cursor_items_end": bookkeeping["cursors"],
        "range_items_end": bookkeeping["ranges"],
        "pg_connections_peak": peak[0],
        "statements_checked": len(sent),
        # the polling drain's run lock pins its one session on purpose (hybridsync.sync.outbox)
        "pinning_statements": sum(1 for s in sent if PINNING.search(s) and PINS_ON_PURPOSE not in s),
        "lag_p99_s": figures["lag_p99_s"],
        "seconds": figures["seconds"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/scale.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a smaller workload per shard count: < 5 min")
    parser.add_argument("--smoke", action="store_true", help="2 and 4 shards, 4 s lifetime: seconds")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    counts, lifetime = ([2, 4], 4.0) if args.smoke else ([1, 4, 16], 20.0)
    if args.smoke:
        work = demo.Workload(customers=12, products=6, orders=24, players=6, follows=10)
    elif args.quick:
        work = demo.Workload(customers=60, products=12, orders=150, players=20, follows=40)
    else:
        work = demo.Workload(customers=200, products=30, orders=600, players=60, follows=150)
    assembly = args.assembly or synth_if_stale(ROOT / "cdk.out")
    console = Console(stderr=True)
    results, states = [], []
    os.environ["PGAPPNAME"] = "bench"  # this process's connections, told apart in the statement log
    for shards in counts:  # each on services of its own, as each would be deployed
        state = workloads.scratch(f"bench-scale-{shards}-")
        states.append(state)
        with console.status(f"{shards} shard(s): the workload, then every check..."):
            url, stop_pg = logged_postgres(state / "postgres")
            os.environ["DATABASE_URL"] = url
            try:
                with local.start(state, "scale", tables=False) as stack:
                    results.append(run_one(assembly, stack, state, shards, lifetime, work))
            finally:
                stop_pg()
    title = (f"the same workload at {', '.join(map(str, counts))} shards, a shard rolled over every "
             f"{lifetime:g} s or {records_per_shard(work, 1)} / shards records")  # fmt: skip
    table = Table("", *(f"{n} shard(s)" for n in counts), title=title)
    for row in ("changes", "lost", "duplicated", "stale", "drift", "conflicts_injected", "conflicts_retried",
                "batches_failed_by_conflict", "rollovers", "shards_created", "cursor_items_end",
                "pg_connections_peak", "statements_checked", "pinning_statements", "lag_p99_s"):  # fmt: skip
        table.add_row(row.replace("_", " "), *(str(r[row]) for r in results))
    Console().print(table)
    figures: dict[str, Any] = {"shards": counts, "pg_connection_cap": PG_CONNECTION_CAP}
    for key in ("changes", "lost", "duplicated", "stale", "drift", "conflicts_injected", "conflicts_retried",
                "batches_failed_by_conflict", "rollovers", "cursor_items_end", "pg_connections_peak",
                "pinning_statements", "statements_checked"):  # fmt: skip
        figures[key] = sum(r[key] for r in results)
    figures["pg_connections_peak"] = max(r["pg_connections_peak"] for r in results)
    figures["lag_p99_s"] = {str(r["shards"]): r["lag_p99_s"] for r in results}
    figures["rollovers_per_shard_count"] = {str(r["shards"]): r["rollovers"] for r in results}
    figures["per_shard_count"] = results
    print(json.dumps(figures))
    must_be_zero = ("lost", "duplicated", "stale", "drift", "batches_failed_by_conflict",
                    "pinning_statements")  # fmt: skip
    bad = [k for k in must_be_zero if figures[k]]
    bad += [f"no rollover at {r['shards']} shard(s)" for r in results if not r["rollovers"]]
    if bad or figures["pg_connections_peak"] > PG_CONNECTION_CAP or not all(r["caught_up"] for r in results):
        for state in states:  # the statement logs and the apps' logs say why
            workloads.keep(state)
        raise SystemExit(f"scale run failed: {bad or 'connections or catch-up'}")


if __name__ == "__main__":
    main()
