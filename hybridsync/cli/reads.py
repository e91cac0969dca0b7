"""The model and reads: what the model declares (`model`), its API (`openapi`), rankings (`top`),
every partition key of a table (`distinct-keys`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hybridsync.cli import common
from hybridsync.cli.common import Commands, scan_options
from hybridsync.model import config


def add_distinct_keys(cli: Commands) -> None:
    keys = cli.add(
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


def _distinct_keys(args: argparse.Namespace) -> int:
    from hybridsync.dynamodb import scans

    table = common.table_name(args)
    declared = common.declared(table)
    if args.by == "index" and not declared.distinct_index:
        raise SystemExit(f"table {declared.name} declares no distinct_index: use --by skip-scan or --by scan")
    index = declared.distinct_index if args.by == "index" else None
    with common.scanning(f"distinct keys of {table} by {args.by}") as progress:
        scanner = common.scanner(args, table, progress, index)
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
    print(f"{len(keys):,} distinct partition keys; " + common.spent(scanner.cost), file=sys.stderr)
    return 0


def add_top(cli: Commands) -> None:
    ranked = cli.add(
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


def _top(args: argparse.Namespace) -> int:
    from hybridsync.reads import rankings
    from hybridsync.runtime import aws

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
            aws.client("dynamodb"),
            args.table or common.tables()[aggregate.table.name],
            aggregate,
            period,
            args.n,
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None
    if args.json:
        from hybridsync.dynamodb.views import public

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


def add_model(cli: Commands) -> None:
    cli.add(
        "model",
        "print the model: tables, GSIs, entities, aggregates, time series",
        "hybridsync model",
        _model,
    )


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


def add_openapi(cli: Commands) -> None:
    described = cli.add(
        "openapi",
        "print the HTTP API's OpenAPI 3.1 document, generated from the project's routes (the API "
        "serves the same at /openapi.json)",
        "hybridsync openapi --out docs/openapi.json",
        _openapi,
    )
    described.add_argument("--out", type=Path, help="write it to this file instead of printing it")


def _openapi(args: argparse.Namespace) -> int:
    from hybridsync.functions import api  # loads the project's routes

    text = json.dumps(api.document(), indent=1, ensure_ascii=False) + "\n"
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0
