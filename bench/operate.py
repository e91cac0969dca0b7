"""Operating it: how soon a failure reaches a person, and what keeping failed batches in S3 costs.

Two parts in one run, on `hybridsync up` (the synthesized app, alarms evaluated locally with every
period shortened to `--alarm-period` seconds):

  alarms   each kind of failure the alarms watch, injected through the running app, `--repeat`
           times: a poison outbox row (SqlSyncDeadLetters), a poison stream record
           (WriteBackDeadLetters), a function that raises (OperationsErrors), a throttled function
           (ApiThrottles) and a failure queue left undrained (ScheduledFailures). `detect_s`: from
           the fault to the ALARM notification; `clear_s`: from the fix (or the fault, for a
           one-off) to the OK one. CloudWatch evaluates complete periods, so the bound is about two
           periods plus the pipeline's own delay: `detect_over_period_max` says how many periods the
           slowest detection took.
  batches  the same failed batches read back two ways: their records stored with them in the
           failure bucket (S3, what the stack does now) and their metadata alone, read back from
           the stream (the SQS destination before). `s3_vs_stream_fetch_ratio`: records per second
           from S3 over records per second from the stream. Both are local emulators (moto's S3,
           the app's Streams API over DynamoDB Local): the ratio does not travel to AWS; what does
           is that the S3 side works after the stream's 24 h, where the other finds nothing.

Usage: python bench/operate.py [--quick | --smoke] [--alarm-period S] [--repeat N] [--assembly DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from hybridsync.dynamodb import store  # noqa: E402
from hybridsync.local.awslambda.mappings import failure_record  # noqa: E402
from hybridsync.local.process import UpProcess, tuned_assembly  # noqa: E402
from hybridsync.local.template import synth_if_stale  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.streams import filters  # noqa: E402
from hybridsync.streams.records import lambda_record  # noqa: E402
from hybridsync.sync import failed  # noqa: E402
from hybridsync.sync.aggregate import Aggregation  # noqa: E402
from shop.model import MODEL  # noqa: E402

PREFIX = "operate"
OURS = ("DYNAMODB_", "AWS_", "DATABASE_URL", "LAMBDA_")


class Run:
    """The app and clients of its services, from its `.local/env`."""

    def __init__(self, up: UpProcess):
        self.up, self.names = up, up.environment()

    def client(self, service: str):  # noqa: ANN201
        endpoint = {
            "dynamodb": "DYNAMODB_ENDPOINT",
            "lambda": "LAMBDA_ENDPOINT",
            "dynamodbstreams": "DYNAMODB_STREAMS_ENDPOINT",
        }.get(service, "AWS_ENDPOINT")
        return boto3.session.Session().client(  # a session each: the faults run in threads at once
            service,
            endpoint_url=self.names[endpoint],
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )

    def notified(self, alarm: str, state: str, after: float) -> float | None:
        """When the topic's subscribers were told `alarm` went to `state`, after `after` (epoch s)."""
        times = []
        for path in (self.up.state / "notifications").glob(f"*-{PREFIX}-{alarm}-{state}.json"):
            message = json.loads(json.loads(path.read_text())["Message"])
            times.append(datetime.strptime(message["StateChangeTime"], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp())
        later = [t for t in times if t >= after - 0.01]
        return min(later) if later else None

    def wait(self, alarm: str, state: str, after: float, timeout_s: float = 120) -> float:
        deadline = time.time() + timeout_s
        while (at := self.notified(alarm, state, after)) is None:
            if time.time() > deadline:
                raise SystemExit(f"operate: {alarm} never went {state} within {timeout_s:.0f} s")
            time.sleep(0.2)
        return at


# --- the faults, each returning (alarm, fault time, fix time or None) ----------------------------


def poison_outbox_row(run: Run) -> tuple[str, float, None]:
    engine = db.create_engine(run.names["DATABASE_URL"])
    at = time.time()
    with engine.begin() as conn:  # a price past DynamoDB's 38 digits: the drain dead-letters it
        conn.execute(
            sa.text("INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1e130, 1)"),
            {"p": f"{uuid.uuid4().hex[:8]}-overflow"},
        )
    engine.dispose()
    return "SqlSyncDeadLetters", at, None


def poison_stream_record(run: Run) -> tuple[str, float, None]:
    values = {
        "OrderId": "x" * 200 + uuid.uuid4().hex,
        "CustomerId": "c",
        "Status": "OPEN",
        "Version": 1,
        "CreatedAt": "2026-01-01T00:00:00.000Z",
        "Total": Decimal(1),
    }  # an id over 128 characters
    at = time.time()
    run.client("dynamodb").put_item(
        TableName=run.names["TABLE_MAIN"], Item=store.marshal(MODEL.entity("Order").item(values))
    )
    return "WriteBackDeadLetters", at, None


def raising_function(run: Run) -> tuple[str, float, None]:
    at = time.time()
    run.client("lambda").invoke(FunctionName="Operations", Payload=b'{"operation": "no-such"}')
    return "OperationsErrors", at, None


def throttled_function(run: Run) -> tuple[str, float, float]:
    lam = run.client("lambda")
    lam.put_function_concurrency(FunctionName="Api", ReservedConcurrentExecutions=0)
    at = time.time()
    with contextlib.suppress(urllib.error.HTTPError):  # 500: the integration was throttled
        urllib.request.urlopen(f"{run.up.status()['http']}/products/p1", timeout=30)
    lam.delete_function_concurrency(FunctionName="Api")
    return "ApiThrottles", at, time.time()


def undrained_queue(run: Run) -> tuple[str, float, float]:
    lam, sqs = run.client("lambda"), run.client("sqs")
    lam.put_function_concurrency(FunctionName="Sweep", ReservedConcurrentExecutions=0)
    at = time.time()
    lam.invoke(
        FunctionName="Sweep", InvocationType="Event", Payload=b"{}"
    )  # straight to its dead-letter queue
    run.wait("ScheduledFailures", "ALARM", at)
    lam.delete_function_concurrency(FunctionName="Sweep")
    (url,) = [u for u in sqs.list_queues()["QueueUrls"] if u.endswith(f"{PREFIX}-ScheduledFailures")]
    fixed = time.time()
    for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return "ScheduledFailures", at, fixed


FAULTS = (poison_outbox_row, poison_stream_record, raising_function, throttled_function, undrained_queue)


def alarms(run: Run, repeat: int, period: int, together: bool = False) -> dict[str, dict[str, list[float]]]:
    """Each fault, from its time to its alarm's ALARM and from its fix to OK; one after another with
    a quiet period between two, or `together` (each fault pages its own alarm: seconds for a smoke)."""

    def measure(fault: Callable[[Run], tuple[str, float, float | None]]) -> tuple[str, float, float]:
        alarm, at, fixed = fault(run)
        alarmed = run.wait(alarm, "ALARM", at)
        cleared = run.wait(alarm, "OK", alarmed)
        return alarm, round(alarmed - at, 2), round(cleared - (fixed or alarmed), 2)

    measured: dict[str, dict[str, list[float]]] = {}
    for _ in range(repeat):
        if together:
            with ThreadPoolExecutor(len(FAULTS)) as pool:
                rounds = list(pool.map(measure, FAULTS))
        else:
            rounds = []
            for fault in FAULTS:
                rounds.append(measure(fault))
                time.sleep(period)  # a quiet period between two faults
        for alarm, detect, clear in rounds:
            figures = measured.setdefault(alarm, {"detect_s": [], "clear_s": []})
            figures["detect_s"].append(detect)
            figures["clear_s"].append(clear)
    return measured


# --- failed batches: S3 payloads against the stream -----------------------------------------------


def batches(run: Run, count: int, size: int) -> dict[str, float]:
    """`count` batches of `size` records of one shard, stored both ways, then read back both ways."""
    client, table = run.client("dynamodb"), run.names["TABLE_MAIN"]
    tag = uuid.uuid4().hex[:6]
    line = MODEL.entity("OrderLine")
    for n in range(count * size):  # order lines the aggregation filters in: records of the stream
        values = {
            "OrderId": f"{tag}-{n}",
            "CustomerId": f"{tag}-c",
            "CreatedAt": "2026-11-26T10:00:00.000Z",
            "Status": "OPEN",
            "LineNo": 1,
            "ProductId": f"{tag}-p",
            "Quantity": 1,
            "UnitPrice": Decimal(1),
            "Version": 1,
        }
        client.put_item(TableName=table, Item=store.marshal(line.item(values)))
    streams = run.client("dynamodbstreams")
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    ours = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            ours += [
                (shard["ShardId"], r) for r in page["Records"] if tag in json.dumps(r["dynamodb"]["Keys"])
            ]
            iterator = page.get("NextShardIterator") if page["Records"] else None
    s3, sqs = run.client("s3"), run.client("sqs")
    bucket = f"{PREFIX}-bench-{tag}"
    s3.create_bucket(Bucket=bucket)
    queue = sqs.create_queue(QueueName=f"{PREFIX}-AggregateFailures-{tag}")["QueueUrl"]
    shard = ours[0][0]
    wanted = Aggregation(MODEL).event_filters()  # as the mapping delivers them: its filters applied
    records = [lambda_record(r, arn) for s, r in ours if s == shard]
    records = [r for r in records if filters.admits(wanted, r)][: count * size]  # our order lines
    for n in range(0, len(records), size):
        batch = records[n : n + size]
        info = failure_record(
            batch,
            stream_arn=arn,
            shard=shard,
            function_arn="x:function:Aggregate",
            condition="RetryAttemptsExhausted",
            invokes=11,
        )
        key = f"aws/lambda/bench/{shard}/2026/11/26/2026-11-26T10.00.00-{uuid.uuid4()}"
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(info | {"payload": {"Records": batch}}))
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(info))
    started = time.perf_counter()
    from_s3 = sum(len(b.records or []) for b in failed.BucketStore(s3, bucket).pending())
    s3_s = time.perf_counter() - started
    started = time.perf_counter()
    from_stream = sum(
        sum(1 for r in failed.stream_records(streams, b) if filters.admits(wanted, r))
        for b in failed.QueueStore(sqs, queue, hold_s=30).pending()
    )
    stream_s = time.perf_counter() - started
    if from_s3 != from_stream:
        raise SystemExit(f"operate: {from_s3} records from S3, {from_stream} from the stream")
    return {
        "batches": -(-from_s3 // size),
        "records": from_s3,
        "s3_records_per_s": round(from_s3 / s3_s, 1),
        "stream_records_per_s": round(from_stream / stream_s, 1),
        "s3_vs_stream_fetch_ratio": round((from_s3 / s3_s) / (from_stream / stream_s), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="example: python bench/operate.py --quick"
    )
    parser.add_argument("--quick", action="store_true", help="one round of faults, 20 batches")
    parser.add_argument(
        "--smoke", action="store_true", help="seconds: the faults at once, 2-second periods, 4 batches"
    )
    parser.add_argument("--alarm-period", type=int, help="every alarm's period, seconds (default 5; smoke 2)")
    parser.add_argument("--repeat", type=int, help="rounds of faults (default 3; quick and smoke 1)")
    parser.add_argument("--assembly", default=str(ROOT / "cdk.out"))
    args = parser.parse_args()
    period = args.alarm_period or (2 if args.smoke else 5)
    repeat = args.repeat or (1 if args.quick or args.smoke else 3)
    count, size = (4, 5) if args.smoke else (20, 25) if args.quick else (40, 50)
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="operate-") as work:
        assembly = tuned_assembly(
            synth_if_stale(Path(args.assembly)), Path(work) / "assembly", MaximumBatchingWindowInSeconds=0
        )
        (Path(work) / "state").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(OURS)}
        up = UpProcess(
            assembly, Path(work) / "state", env, prefix=PREFIX, options=("--alarm-period", str(period))
        )
        with console.status("starting hybridsync up..."):
            up.start()
        try:
            run = Run(up)
            with console.status(f"{repeat} round(s) of {len(FAULTS)} faults, {period}-second periods..."):
                measured = alarms(run, repeat, period, together=args.smoke)
            with console.status(f"{count} failed batches of {size}, read back both ways..."):
                fetched = batches(run, count, size)
        finally:
            up.stop()
    table = Table(title=f"from a failure to the person it pages (periods of {period} s, {repeat} round(s))")
    for column in ("alarm", "detect s (median)", "clear s (median)", "periods to detect (max)"):
        table.add_column(column)
    for alarm, figures in measured.items():
        table.add_row(
            alarm,
            f"{statistics.median(figures['detect_s']):.1f}",
            f"{statistics.median(figures['clear_s']):.1f}",
            f"{max(figures['detect_s']) / period:.2f}",
        )
    console.print(table)
    console.print(
        f"failed batches: {fetched['records']} records in {fetched['batches']} batches; from S3 "
        f"{fetched['s3_records_per_s']:,.0f} records/s, from the stream "
        f"{fetched['stream_records_per_s']:,.0f} records/s (ratio {fetched['s3_vs_stream_fetch_ratio']})"
    )
    print(
        json.dumps(
            {
                "alarm_period_s": period,
                "rounds": repeat,
                "kinds": len(measured),
                "all_alarmed_and_cleared": len(measured) == len(FAULTS),
                "detect_s": {a: statistics.median(f["detect_s"]) for a, f in measured.items()},
                "clear_s": {a: statistics.median(f["clear_s"]) for a, f in measured.items()},
                "detect_over_period_max": round(
                    max(max(f["detect_s"]) for f in measured.values()) / period, 2
                ),
                **fetched,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
