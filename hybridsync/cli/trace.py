"""`hybridsync trace TABLE ATTR=VALUE...`: where one change went (hybridsync.sync.trace): from the
running local app's stream, function logs and PostgreSQL; `--deployed STACK`: from the deployed
table's stream, the stack's functions' logs (CloudWatch Logs Insights) and its operations function
(PostgreSQL is in its VPC)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from hybridsync.cli import common
from hybridsync.cli.common import Commands

SINCE = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_trace(cli: Commands) -> None:
    trace = cli.add(
        "trace",
        "where one change went, in time order: each stream record of the item, each invocation that "
        "read it (function, request, the batch's outcome, its freshness), each aggregate item it "
        "moved and by how much, its dead letters and redrives, and the row PostgreSQL holds; from "
        "the running local app (`source .local/env` first), or with --deployed STACK from AWS (the "
        "tables by $TABLE_<NAME>, as the other --deployed commands)",
        "hybridsync trace main PK=ACCOUNT#a-1 SK=PROFILE --json",
        _trace,
    )
    trace.add_argument(
        "table",
        metavar="TABLE|ENTITY",
        help="the model's table name (`hybridsync model` lists them), or "
        "an entity with a SQL table: then ATTR=VALUE is its sql_key (`trace Invoice InvoiceId=i-1`)",
    )
    trace.add_argument("key", metavar="ATTR=VALUE", nargs="+", help="the item's key attributes (or the "
                       "entity's sql_key)")  # fmt: skip
    trace.add_argument("--since", default="24h", help="how far back: 90s, 30m, 6h, 1d (default 24h, the "
                       "stream's retention)")  # fmt: skip
    trace.add_argument("--json", action="store_true", help="a JSON list of events, each with its `kind`")
    trace.add_argument("--url", help="PostgreSQL URL (default $DATABASE_URL)")
    trace.add_argument(
        "--state-dir", default=".local", help="the local app's state (its logs/; default .local)"
    )
    common.deployed_option(trace)


def _trace(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from hybridsync.model import config
    from hybridsync.sync import trace

    model = config.model()
    key = dict(_pair(given) for given in args.key)
    if not any(t.name == args.table for t in model.tables):  # an entity and its sql_key
        args.table, key = _located(args, model, key)
    since = time.time() - _seconds(args.since)
    try:
        events = trace.trace(model, args.table, key, common.tables(), _sources(args, model), since)
    except (ValueError, RuntimeError) as wrong:
        raise SystemExit(f"hybridsync trace: {wrong}") from None
    except (BotoCoreError, ClientError) as error:
        raise SystemExit(f"hybridsync trace: {error} (the app running? TABLE_<NAME> and the credentials "
                         "right?)") from None  # fmt: skip
    if args.json:
        print(json.dumps([e.as_json() for e in events], indent=1, default=str))
        return 0
    for event in events:
        print(f"{event.as_json()['at']}  {event.kind:<13} {_said(event.detail)}")
    if not events:
        print(f"nothing of {args.table} {' '.join(args.key)} since {args.since} ago")
    return 0


def _sources(args: argparse.Namespace, model: Any) -> Any:
    """Locally: the app's stream, log files and PostgreSQL; `--deployed`: its operations function
    for PostgreSQL; `--deployed STACK`: the stack's log groups too, and the stream read only at the
    records the logs name (a third reader of a shard risks throttling its consumers)."""
    from hybridsync.local.dynamodb.streams import every_record
    from hybridsync.runtime import aws, db
    from hybridsync.sync import trace

    streams = aws.client("dynamodbstreams")
    sources = trace.Sources(aws.client("dynamodb"), every_record(streams), postgres=None, lines=lambda *_: ())
    if not args.deployed:  # the local app's logs (`--deployed` alone: its operations function)
        logs = Path(args.state_dir) / "logs"
        if not logs.is_dir():
            raise SystemExit(f"hybridsync trace: no {logs}: is `hybridsync up` running (--state-dir)?")
        sources.lines = trace.local_lines(logs)
    else:  # the stack's functions' log groups
        warn = lambda line: print(f"hybridsync trace: {line}", file=sys.stderr)  # noqa: E731
        sources.lines = trace.insights_lines(aws.client("logs"), log_groups(args.deployed), say=warn)
        sources.records = at_sequences(streams)
    bucket = (common.stack_output(args.deployed, "FailedBatchesBucketName")[0] if args.deployed
              else os.environ.get("FAILED_BATCHES_BUCKET"))  # fmt: skip
    if bucket:  # the batches a mapping gave up on, their records kept
        from hybridsync.sync import failed

        sources.failed = failed.BucketStore(aws.client("s3"), bucket).pending
    if args.deployed is None:
        sources.postgres = trace.in_postgres(db.create_engine(common.database_url(args)), model)
        return sources

    def postgres(table: str, key: Any, image: Any) -> list[Any]:  # in the operations function
        asked = {"operation": "trace", "table": table, "key": dict(key), "image": image}
        return [trace.Event.from_json(e) for e in common.deployed(args, asked)["events"]]

    sources.postgres = postgres
    return sources


def _located(args: argparse.Namespace, model: Any, given: dict[str, str]) -> tuple[str, dict[str, str]]:
    """An entity and its sql_key values: its table and its item's key, from the row PostgreSQL
    holds (here, or in the stack's operations function)."""
    from hybridsync.runtime import db
    from hybridsync.sync import trace

    try:
        if args.deployed is not None:
            said = common.deployed(args, {"operation": "trace", "entity": args.table, "key": given})
            return said["table"], said["key"]
        return trace.located(db.create_engine(common.database_url(args)), model, args.table, given)
    except ValueError as wrong:
        raise SystemExit(f"hybridsync trace: {wrong}") from None


def log_groups(stack: str) -> list[str]:
    """The log groups of a deployed stack's functions (each function's own, cdk/assets.py)."""
    from botocore.exceptions import ClientError

    from hybridsync.runtime import aws

    pages = aws.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
    try:
        found = [r["PhysicalResourceId"] for page in pages for r in page["StackResourceSummaries"]
                 if r["ResourceType"] == "AWS::Logs::LogGroup"]  # fmt: skip
    except ClientError as error:
        raise SystemExit(f"hybridsync trace --deployed {stack}: {error}") from None
    if not found:
        raise SystemExit(
            f"hybridsync trace --deployed {stack}: the stack has no log group (a pipeline stack's)"
        )
    if len(found) > 50:  # a Logs Insights query reads at most 50
        print(f"hybridsync trace: {stack} has {len(found)} log groups; the query reads 50", file=sys.stderr)
    return found[:50]


def at_sequences(streams: Any) -> Any:
    """The records of the given sequence numbers: each read in the shard whose range holds it
    (DescribeStream, paged), from that number, one record."""
    from hybridsync.streams.records import lambda_record

    def read(arn: str, sequences: list[str]) -> list[dict[str, Any]]:
        shards, start = [], None
        while True:
            page = streams.describe_stream(
                StreamArn=arn, **({"ExclusiveStartShardId": start} if start else {})
            )
            shards += page["StreamDescription"]["Shards"]
            if not (start := page["StreamDescription"].get("LastEvaluatedShardId")):
                break
        found = []
        for sequence in map(int, sequences):
            for shard in shards:
                span = shard["SequenceNumberRange"]
                starts = span["StartingSequenceNumber"]
                if not int(starts) <= sequence <= int(span.get("EndingSequenceNumber") or sequence):
                    continue
                iterator = streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="AT_SEQUENCE_NUMBER",
                    SequenceNumber=str(sequence).zfill(len(starts)),  # as the stream writes them
                )["ShardIterator"]  # fmt: skip
                got = streams.get_records(ShardIterator=iterator, Limit=1)["Records"]
                found += [
                    lambda_record(r, arn) for r in got if int(r["dynamodb"]["SequenceNumber"]) == sequence
                ]
                break
        return found

    return read


def _pair(given: str) -> tuple[str, str]:
    name, sign, value = given.partition("=")
    if not sign or not name:
        raise SystemExit(f"hybridsync trace: {given!r}: each key attribute as ATTR=VALUE")
    return name, value


def _seconds(since: str) -> float:
    found = SINCE.match(since.strip())
    if not found:
        raise SystemExit(f"hybridsync trace: --since {since!r}: a number and s, m, h or d (e.g. 30m)")
    return int(found[1]) * UNITS[found[2]]


def _said(detail: dict[str, Any]) -> str:
    return "  ".join(f"{k}={json.dumps(v, default=str) if isinstance(v, dict | list) else v}"
                     for k, v in detail.items() if v is not None)  # fmt: skip
