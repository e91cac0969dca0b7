"""Costs and plan: the pipeline for a workload on paper (`plan`), the units of each access
pattern (`cost`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hybridsync.cli import common
from hybridsync.cli.common import Commands
from hybridsync.dynamodb.scans import DEFAULT_RATE

if TYPE_CHECKING:
    from hybridsync.sizing.costs import Row, ScanPlan


def add_plan(cli: Commands) -> None:
    planned = cli.add(
        "plan",
        "the pipeline for a described workload, on paper: shards, concurrency, PostgreSQL connections, "
        "GSI write shards, where warm and burst capacity matter, the monthly cost by component, "
        "each change source priced side by side (DynamoDB Streams, Kinesis Data Streams for DynamoDB) "
        "with which is cheaper and why, and each freshness setting side by side (realtime, economy) "
        "with the difference, at this rate and idle",
        "hybridsync plan --writes-per-s 1000 --change-source both --freshness both",
        _plan,
    )
    planned.add_argument(
        "--writes-per-s", type=common.positive(float), required=True, help="item writes per second"
    )
    planned.add_argument(
        "--item-kb", type=common.positive(float), default=1.0, help="average item size (default 1)"
    )
    planned.add_argument("--reads-per-s", type=float, default=0.0, help="API reads per second (default 0)")
    planned.add_argument("--order-line-share", type=float, default=0.6,
                         help="share of writes that feed the aggregates (default 0.6)")  # fmt: skip
    planned.add_argument("--retention-days", type=int, default=30, help="S3 archive kept (default 30)")
    planned.add_argument("--settled-share", type=float, default=0.01,
                         help="write-back records settled by reading their item: replays, rows loads "
                              "made (default 0.01)")  # fmt: skip
    planned.add_argument("--change-source", choices=["both", "dynamodb", "kinesis"], default="both",
                         help="which change source to price: DynamoDB Streams, Kinesis Data Streams for "
                              "DynamoDB, or both side by side (default both)")  # fmt: skip
    planned.add_argument("--kinesis-shards", type=common.positive(int),
                         help="kinesis: provisioned shards (default: on-demand capacity)")  # fmt: skip
    planned.add_argument("--retention-h", type=float, default=24,
                         help="kinesis: hours the stream keeps records, 24-8760 (default 24)")  # fmt: skip
    planned.add_argument("--own-consumers", type=int, default=0,
                         help="kinesis: your own consumers beside the engine's two (default 0)")  # fmt: skip
    planned.add_argument("--no-fan-out", action="store_true",
                         help="kinesis: consumers share each shard's reads instead of one enhanced "
                              "fan-out consumer each")  # fmt: skip
    planned.add_argument("--freshness", choices=["both", "realtime", "economy"], default="both",
                         help="which `-c freshness` setting to price: realtime (no batching windows, the "
                              "drain polling all month), economy (5 s and 30 s windows, a drain a minute), "
                              "or both side by side with realtime minus economy (default both; the "
                              "plan's aggregation is priced at realtime then)")  # fmt: skip
    planned.add_argument("--replicas", type=int, default=0,
                         help="Regions holding a replica of every table besides home: their replicated "
                              "writes, indexes and cross-Region transfer (default 0)")  # fmt: skip
    planned.add_argument("--transfer-usd-per-gb", type=float, default=None,
                         help="with --replicas: the cross-Region transfer price (default 0.02: us-east-1 "
                              "to another US Region)")  # fmt: skip
    planned.add_argument("--json", action="store_true", help="one JSON object instead of the table")


def _plan(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hybridsync.sizing import plan

    work = plan.Workload(
        writes_per_s=args.writes_per_s, item_kb=args.item_kb, reads_per_s=args.reads_per_s,
        order_line_share=args.order_line_share, retention_days=args.retention_days,
        settled_share=args.settled_share,
    )  # fmt: skip
    result = plan.plan(work, freshness="realtime" if args.freshness == "both" else args.freshness)
    if args.own_consumers < 0:
        raise SystemExit("plan: --own-consumers must be 0 or more")
    # freshness is priced on the source the consumers read: DynamoDB Streams unless Kinesis alone
    source = "kinesis" if args.change_source == "kinesis" else "dynamodb"
    try:
        sources = plan.change_sources(work, args.change_source, args.kinesis_shards, args.retention_h,
                                      args.own_consumers, not args.no_fan_out)  # fmt: skip
        fresh = plan.freshness_costs(work, args.freshness, source, args.kinesis_shards, not args.no_fan_out)
    except ValueError as error:
        raise SystemExit(f"plan: {error}") from None
    try:
        replicas = _replicas(args, work, result)
    except ValueError as error:
        raise SystemExit(f"plan: {error}") from None
    if args.json:
        print(json.dumps(vars(result) | {"replicas_usd": replicas, "change_sources": {
            name: {"label": c.label, "monthly_usd": c.items | {"total": c.total}, "notes": c.notes}
            for name, c in sources.items()}, "stream_prices_as_of": plan.STREAM_PRICES_AS_OF,
            "freshness_costs": {name: {"source": source, "shards": c.shards, "idle_usd": c.idle,
                                       "monthly_usd": c.items | {"total": c.total}, "notes": c.notes}
                                for name, c in fresh.items()}}))  # fmt: skip
        return 0
    table = Table("", "", title=f"{args.writes_per_s:,.0f} writes/s of {args.item_kb:g} KB, "
                  f"{args.reads_per_s:,.0f} reads/s (prices of {result.prices_as_of}, us-east-1)")  # fmt: skip  # noqa: E501
    rows = {"write units/s": f"{result.write_units_per_s:,.0f}", "partitions": result.partitions,
            "stream shards": result.shards, "PostgreSQL connections": result.pg_connections,
            "Aurora ACU": result.aurora_acu, "Lambda GB-s / month": f"{result.lambda_gb_s_month:,}",
            "freshness (of the aggregation's writes)": result.freshness}  # fmt: skip
    rows |= {f"concurrency: {k}": v for k, v in result.concurrency.items()}
    rows |= {f"GSI write shards: {k}": v for k, v in result.gsi_shards.items()}
    rows |= {f"$/month: {k}": f"{v:,.2f}" for k, v in result.monthly_usd.items()}
    if replicas:
        rows |= {f"$/month: {args.replicas} replica Region(s): {k}": f"{v:,.2f}" for k, v in replicas.items()}
    for name, value in rows.items():
        table.add_row(name, str(value))
    Console().print(table)
    for note in result.notes:
        print(f"- {note}")
    _print_sources(sources)
    _print_freshness(fresh, source)
    return 0


def _replicas(args: argparse.Namespace, work: Any, result: Any) -> dict[str, float] | None:
    """`--replicas`: what the other Regions add to the month (sizing/replicas.py), None without."""
    from hybridsync.sizing import replicas

    if args.transfer_usd_per_gb is not None and not args.replicas:
        raise ValueError("--transfer-usd-per-gb prices replicas' transfer: give --replicas N too")
    if not args.replicas:
        return None
    price = replicas.TRANSFER_USD_PER_GB if args.transfer_usd_per_gb is None else args.transfer_usd_per_gb
    return replicas.replicas_cost(work, result, args.replicas, price)


def _print_sources(sources: dict) -> None:
    """The change sources side by side: a $/month figure per line item, the total per source, and
    which is cheaper and why."""
    from rich.console import Console
    from rich.table import Table

    from hybridsync.sizing import plan

    names = {"dynamodb": "DynamoDB Streams", "kinesis": "Kinesis Data Streams"}
    table = Table(title=f"change sources, $/month (prices of {plan.STREAM_PRICES_AS_OF}, us-east-1)")
    table.add_column("line item", no_wrap=True)
    for name, cost in sources.items():
        table.add_column(f"{names[name]} ({cost.label})", justify="right")
    items = list(dict.fromkeys(item for cost in sources.values() for item in cost.items))
    for item in items:
        table.add_row(item, *(f"{c.items[item]:,.2f}" if item in c.items else "-" for c in sources.values()))
    table.add_row("total", *(f"{c.total:,.2f}" for c in sources.values()), style="bold")
    Console(width=None if sys.stdout.isatty() else 130).print(table)
    for cost in sources.values():
        for note in cost.notes:
            print(f"- {names[cost.source]}: {note}")
    if sentence := plan.cheaper(sources):
        print(sentence)


def _print_freshness(costs: dict, source: str) -> None:
    """The freshness settings side by side: a $/month figure per line item, the total, the idle cost
    (no traffic at all) on a line of its own, and realtime minus economy when both are shown."""
    from rich.console import Console
    from rich.table import Table

    from hybridsync.sizing import plan

    names = {"realtime": "realtime (no windows)", "economy": "economy (5 s, 30 s windows)"}
    shards = next(iter(costs.values())).shards
    stream = {"dynamodb": "DynamoDB stream", "kinesis": "Kinesis"}[source]
    table = Table(title=f"freshness, $/month ({shards} {stream} shard{'s' * (shards != 1)}; "
                        f"prices of {plan.PRICES_AS_OF}, us-east-1)")  # fmt: skip
    table.add_column("line item", no_wrap=True)
    for name in costs:
        table.add_column(names[name], justify="right")
    both = len(costs) == 2  # realtime, then economy
    if both:
        table.add_column("realtime - economy", justify="right")

    def row(label: str, values: list[float], style: str | None = None) -> None:
        difference = [f"{values[0] - values[1]:+,.2f}"] if both else []
        table.add_row(label, *(f"{v:,.2f}" for v in values), *difference, style=style)

    for item in next(iter(costs.values())).items:
        row(item, [c.items[item] for c in costs.values()])
    row("total", [c.total for c in costs.values()], style="bold")
    row("idle: no traffic at all (the drain alone)", [c.idle for c in costs.values()], style="bold")
    Console(width=None if sys.stdout.isatty() else 130).print(table)
    for cost in costs.values():
        for note in cost.notes:
            print(f"- {cost.freshness}: {note}")
    if sentence := plan.freshness_difference(costs):
        print(sentence)


def add_cost(cli: Commands) -> None:
    cost = cli.add(
        "cost",
        "read and write units of each access pattern for a workload, beside the naive way",
        "hybridsync cost distinct-keys --keys 2000000 --items-per-key 1000 --item-size 500",
        _cost,
    )
    patterns = ["all", "distinct-keys", "time-range", "open-orders", "price-change", "order-lines",
                "write-sharding", "scan"]  # fmt: skip
    cost.add_argument(
        "pattern", nargs="?", default="all", choices=patterns, metavar="PATTERN",
        help=f"one of {', '.join(patterns)} (default: all)",
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


def _cost(args: argparse.Namespace) -> int:
    rows, scan = _cost_rows(args)
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
    _print_cost_table(rows)
    print("1 read unit = 4 KB (4,096 bytes) strongly consistent, or 8 KB eventually consistent.")
    if args.pattern in ("all", "distinct-keys"):
        print("The seeds' 125,000,000 and 37,500 divide by 4,000-byte kilobytes: 2.4% above the model.")
    if scan:
        _print_scan(scan)
    return 0


def _cost_rows(args: argparse.Namespace) -> tuple[list[Row], ScanPlan | None]:
    """The rows of the patterns asked for, and the full scan's figures (None unless asked for)."""
    from hybridsync.sizing import costs

    rows: list[Row] = []
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
    return rows, scan


def _print_cost_table(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

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


def _print_scan(scan: ScanPlan) -> None:
    from hybridsync.sizing import costs

    hours = f" ({scan.minutes / 60:,.1f} h)" if scan.minutes >= 120 else ""
    print(f"A full scan of {scan.table_gb:g} GB: {scan.cost.read_units:,.0f} read units, "
          f"{scan.minutes:,.1f} minutes{hours} at {scan.rate:g} units/s.")  # fmt: skip
    if scan.parallel:
        print(f"A parallel scan is warranted (>= {costs.PARALLEL_SCAN_GB} GB) if read capacity is "
              f"spare and one scan is too slow: start with {scan.segments} segments (one per "
              f"{costs.GB_PER_SEGMENT} GB); the rate is their total.")  # fmt: skip
    else:
        print(f"Under {costs.PARALLEL_SCAN_GB} GB a parallel scan is not warranted: one scan, paced.")
