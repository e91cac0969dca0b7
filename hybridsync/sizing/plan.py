"""A described workload, on paper: what the pipeline needs at that rate and what it costs a month.

Every figure follows from AWS's documented limits and prices (us-east-1 list prices, dated below;
check them before you quote one):

- DynamoDB: a partition serves 1,000 write units/s and 3,000 read units/s; a stream has at least
  one shard per partition; a new on-demand table starts with about 4,000 write units/s of warm
  throughput and doubles to its previous peak (a jump past that throttles until it splits);
  burst capacity keeps up to 300 s of unused capacity (developerguide: bp-partition-key-design,
  burst-adaptive-capacity, on-demand-capacity-mode).
- Lambda runs one invocation per stream shard x parallelization factor for each mapping.
- A GSI key takes what a partition takes: 1,000 write units/s per key value, so a hot key needs
  ceil(rate / 1,000) write shards (the model's `Sharded(n)` declarations are checked against it).
- PostgreSQL: one connection per concurrent invocation (the functions' pools hold one, and nothing
  they send pins an RDS Proxy connection), plus the API's and the drain's.
- The change source: DynamoDB Streams' reads are free for Lambda triggers; Kinesis Data Streams for
  DynamoDB charges a change data capture unit per write and the stream's own prices
  (`change_sources`, `STREAM_PRICES`; docs/change-sources.md).
- Freshness (`-c freshness`): realtime's consumers are invoked as often as Lambda reads a shard and
  its outbox drain runs all month; economy's wait out batching windows and drain once a minute
  (`freshness_costs`; the aggregation's write units at each, `AGGREGATE_UNITS_RATIO`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

PRICES_AS_OF = "2026-11-01"  # us-east-1 list prices
PRICES = {
    "dynamodb_write_request_unit": 0.625 / 1e6,  # on demand, per write request unit
    "dynamodb_read_request_unit": 0.125 / 1e6,  # on demand, per read request unit
    # https://aws.amazon.com/lambda/pricing/: x86_64, the architecture the stacks deploy
    # (hybridsync/cdk/assets.py ARCHITECTURE; arm64's is 0.0000133334), first 6 billion GB-s a month
    "lambda_gb_s": 0.0000166667,
    "lambda_request": 0.20 / 1e6,
    # https://aws.amazon.com/cloudwatch/pricing/: logs ingested, Standard class (Lambda's logs, tiered
    # since 2025-05-01, pay this for their first 10 TB a month)
    "cloudwatch_logs_gb": 0.50,
    "aurora_acu_hour": 0.12,  # Aurora Serverless v2, PostgreSQL, standard
    "rds_proxy_acu_hour": 0.015,  # per ACU-hour of the database it fronts (Serverless v2)
    "s3_gb_month": 0.023,
}
SECONDS_PER_MONTH = 730 * 3600
PARTITION_WRITE_UNITS = 1000
PARTITION_READ_UNITS = 3000
WARM_WRITE_UNITS = 4000  # a new on-demand table
CONNECTIONS_PER_ACU = (
    100  # an assumption: check your cluster's max_connections (it grows with the ACU ceiling)
)


@dataclass(frozen=True)
class Workload:
    writes_per_s: float
    item_kb: float = 1.0
    order_line_share: float = 0.6  # writes that are order lines (they feed the aggregates)
    reads_per_s: float = 0.0
    read_hit_ratio: float = 0.9  # cache-aside hits (the rest read PostgreSQL and write the view)
    gsi_count: int = 2  # GSIs each write lands in (sparse ones count as a share)
    hot_key_share: float = 0.05  # the busiest aggregate key's share of order lines
    retention_days: int = 30  # PostgreSQL and S3 keep what DynamoDB expires
    parallelization: int = 1
    # write-back records settled from the table (one strongly consistent read each): replays, a
    # shard's children numbered below their parent, the first change of a row a load made
    settled_share: float = 0.01


@dataclass
class Plan:
    workload: dict[str, Any]
    write_units_per_s: float
    partitions: int
    shards: int
    concurrency: dict[str, int]
    pg_connections: int
    aurora_acu: float
    gsi_shards: dict[str, int]
    notes: list[str] = field(default_factory=list)
    lambda_gb_s_month: float = 0.0
    monthly_usd: dict[str, float] = field(default_factory=dict)
    prices_as_of: str = PRICES_AS_OF
    freshness: str = "realtime"  # the setting the aggregation's write units are priced at


# The aggregation's write units: a naive per-record ADD updates each aggregate an order line feeds
# (the shop's 3) at 1 unit for its ~200-byte item and 2 more when its Rankings GSI entry moves
# (bench/aggregate.py, NAIVE_UNITS_PER_UPDATE); the handler sums a batch's deltas per item first,
# journal and watermark included, so it writes a share of that: the bigger the batches, the smaller.
AGGREGATES_PER_LINE = 3
NAIVE_UNITS_PER_ADD = 1 + 2
# measured by bench/freshness.py (the shop's workload: Zipf products and customers, 1,000 changes/s
# over 4 shards; realtime: a batch per shard per 0.25 s poll, economy: 2,500-record batches), the
# same in every run: they follow from DynamoDB's unit rules, not the machine
AGGREGATE_UNITS_RATIO = {"realtime": 0.624, "economy": 0.165}


def aggregation_write_units(work: Workload, freshness: str = "realtime",
                            ratios: dict[str, float] = AGGREGATE_UNITS_RATIO) -> float:  # fmt: skip
    """The aggregation's DynamoDB write units a second: a naive per-record ADD's, times the share
    that `freshness`'s batches leave (`ratios`)."""
    lines_per_s = work.writes_per_s * work.order_line_share
    return lines_per_s * AGGREGATES_PER_LINE * NAIVE_UNITS_PER_ADD * ratios[freshness]


def partitions(work: Workload) -> int:
    """The table's partitions at `work`'s rate: its writes and its reads, each at a partition's limit."""
    return max(1, math.ceil(work.writes_per_s * math.ceil(work.item_kb) / PARTITION_WRITE_UNITS),
               math.ceil(work.reads_per_s / PARTITION_READ_UNITS))  # fmt: skip


def plan(work: Workload, declared_shards: dict[str, int] | None = None, freshness: str = "realtime",
         ratios: dict[str, float] = AGGREGATE_UNITS_RATIO) -> Plan:  # fmt: skip
    """The pipeline at `work`'s rate, its aggregation priced at `freshness`; `declared_shards` (a
    GSI key's name -> its `Sharded(n)`) are checked against what the rate needs."""
    wu = math.ceil(work.item_kb)  # write units per write
    write_units = work.writes_per_s * wu
    table_partitions = partitions(work)
    shards = table_partitions  # at least one stream shard per partition
    concurrency = {"write_back": shards * work.parallelization, "aggregate": shards * work.parallelization}
    api = math.ceil(work.reads_per_s * 0.01)  # ~10 ms an invocation
    concurrency["api"] = api
    pg_connections = concurrency["write_back"] + concurrency["aggregate"] // 10 + api + 2  # drain, migrate
    # Aurora Serverless v2: the ACU ceiling that allows the connections, and the write load's floor
    acu = max(
        0.5, math.ceil(pg_connections / CONNECTIONS_PER_ACU * 2) / 2, round(work.writes_per_s / 2000, 1)
    )
    # (one ACU per ~2,000 merged rows/s: the write-back's merge measured ~13,000 rows/s on 2 cores)
    lines_per_s = work.writes_per_s * work.order_line_share
    hot = lines_per_s * work.hot_key_share  # one aggregate item's updates per second, before batching
    # a batch coalesces a hot item's records into one update per shard and batch (~1 s): per key
    # value the GSI sees at most one rank move (2 write units) per shard each second
    rank_wu = min(hot, shards) * 2
    gsi_shards = {"Rankings": max(1, math.ceil(rank_wu / PARTITION_WRITE_UNITS))}
    time_shard_wu = work.writes_per_s * work.order_line_share / 3 * wu  # orders (not lines) by time
    gsi_shards["TimeShard"] = max(1, math.ceil(time_shard_wu / PARTITION_WRITE_UNITS))
    notes = []
    if write_units > WARM_WRITE_UNITS:
        notes.append(f"{write_units:,.0f} write units/s is past a new on-demand table's ~4,000 warm "
                     "throughput: pre-warm it (warm throughput) or ramp up over ~30 minutes")  # fmt: skip
    for key, needed in gsi_shards.items():
        declared = (declared_shards or {}).get(key)
        if declared is not None and declared < needed:
            notes.append(f"{key}: declared Sharded({declared}), the rate needs {needed}")
    if pg_connections > 5000:
        notes.append("PostgreSQL connections past Aurora's limit: batch larger, or fewer shards per mapping")
    notes.append("burst capacity (300 s of unused capacity) absorbs spikes only on provisioned tables "
                 "and within a partition's 1,000 WU/s; adaptive capacity moves it to hot partitions")  # fmt: skip  # noqa: E501
    # Lambda: write-back ~2 ms a record at 512 MB, aggregation ~0.5 ms at 512 MB, API ~10 ms at 256 MB
    gb_s = work.writes_per_s * 0.002 * 0.5 + lines_per_s * 0.0005 * 0.5 + work.reads_per_s * 0.01 * 0.25
    gb_s_month = gb_s * SECONDS_PER_MONTH
    invocations = (work.writes_per_s / 100 * 2 + work.reads_per_s) * SECONDS_PER_MONTH
    month = SECONDS_PER_MONTH
    monthly = {
        "dynamodb_writes": write_units * month * PRICES["dynamodb_write_request_unit"],
        "dynamodb_reads": work.reads_per_s * month * PRICES["dynamodb_read_request_unit"] * 0.5,
        "gsi_writes": write_units * work.gsi_count * month * PRICES["dynamodb_write_request_unit"],
        "aggregation_writes": aggregation_write_units(work, freshness, ratios)
        * month
        * PRICES["dynamodb_write_request_unit"],
        # a strongly consistent read: 1 read unit per 4 KB (BatchGetItem, developerguide: read-write units)
        "write_back_settling": work.writes_per_s
        * work.settled_share
        * math.ceil(work.item_kb / 4)
        * month
        * PRICES["dynamodb_read_request_unit"],
        "lambda": gb_s_month * PRICES["lambda_gb_s"] + invocations * PRICES["lambda_request"],
        "aurora_acu": acu * 730 * PRICES["aurora_acu_hour"],
        "rds_proxy": acu * 730 * PRICES["rds_proxy_acu_hour"],
        "s3": work.writes_per_s
        * work.item_kb
        * month
        / 1e6
        * work.retention_days
        / 30
        * PRICES["s3_gb_month"],
    }
    monthly = {k: round(v, 2) for k, v in monthly.items()}
    monthly["total"] = round(sum(monthly.values()), 2)
    return Plan(asdict(work), write_units, table_partitions, shards, concurrency, pg_connections, acu,
                gsi_shards, notes, round(gb_s_month), monthly, freshness=freshness)  # fmt: skip


# The change source: where the stream consumers read a table's changes (`-c change_source`).
# us-east-1 list prices as of the date below; AWS changes them: check the pages before quoting one.
# - DynamoDB: https://aws.amazon.com/dynamodb/pricing/on-demand/ (change data capture, streams);
#   a Lambda trigger's stream reads are free (developerguide: CostOptimization_StreamsUsage).
# - Kinesis Data Streams: https://aws.amazon.com/kinesis/data-streams/pricing/
STREAM_PRICES_AS_OF = "2026-11-27"
STREAM_PRICES = {
    # DynamoDB Streams: a GetRecords call (up to 1,000 records or 1 MB); free for Lambda triggers
    "dynamodb_stream_read_request": 0.02 / 1e5,
    # Kinesis Data Streams for DynamoDB: one change data capture unit per write of up to 1 KB
    "dynamodb_cdc_unit": 0.10 / 1e6,
    # Kinesis on-demand
    "kinesis_stream_hour": 0.04,
    "kinesis_gb_ingested": 0.08,  # each record rounded up to 1 KB
    "kinesis_gb_retrieved": 0.04,  # shared-throughput reads
    "kinesis_fan_out_gb_on_demand": 0.05,  # enhanced fan-out reads, per consumer
    "kinesis_extended_gb_month": 0.10,  # retention past 24 h, up to 7 days
    # Kinesis provisioned
    "kinesis_shard_hour": 0.015,
    "kinesis_put_payload_unit": 0.014 / 1e6,  # 25 KB of a record; shared-throughput reads are free
    "kinesis_extended_shard_hour": 0.02,  # retention past 24 h, up to 7 days
    "kinesis_fan_out_consumer_shard_hour": 0.015,
    "kinesis_fan_out_gb": 0.013,
    # both modes
    "kinesis_long_term_gb_month": 0.023,  # retention past 7 days, up to 365
}
HOURS_PER_MONTH = 730
ENGINE_CONSUMERS = 2  # the write-back and the aggregation
STREAM_READERS_PER_SHARD = 2  # AWS: no more than two readers per DynamoDB stream shard
KINESIS_FAN_OUT_CONSUMERS = 20  # registered enhanced fan-out consumers per stream
PUT_PAYLOAD_KB = 25
SHARD_WRITE_MB = 1.0  # a Kinesis shard takes 1 MB/s or 1,000 records/s
SHARD_WRITE_RECORDS = 1000
RECORD_OVERHEAD_KB = 0.25  # a change record's keys, names and times, beside its two images
KB_PER_GB = 1024**2


@dataclass
class SourceCost:
    """One change source's monthly cost for a workload: line item -> $/month."""

    source: str  # "dynamodb" or "kinesis"
    label: str  # how it reads: "Lambda triggers", "on-demand", "provisioned, 4 shards"
    items: dict[str, float]
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return round(sum(self.items.values()), 2)


def kinesis_record_kb(work: Workload) -> float:
    """A change record's size in Kinesis: the item's old and new images and the record's own
    fields (an insert or a delete carries one image: this is the update's, the larger)."""
    return 2 * work.item_kb + RECORD_OVERHEAD_KB


def kinesis_shards_needed(work: Workload) -> int:
    """The Kinesis shards `work`'s change records need: each takes 1 MB/s or 1,000 records/s."""
    mb_per_s = work.writes_per_s * kinesis_record_kb(work) / 1024
    return max(1, math.ceil(mb_per_s / SHARD_WRITE_MB), math.ceil(work.writes_per_s / SHARD_WRITE_RECORDS))


def _consumer_lambda(work: Workload) -> float:
    """The stream consumers' Lambda cost, the same whichever source feeds them (as `plan` prices
    it: write-back ~2 ms a record, aggregation ~0.5 ms, 512 MB, ~100-record batches)."""
    lines_per_s = work.writes_per_s * work.order_line_share
    gb_s = work.writes_per_s * 0.002 * 0.5 + lines_per_s * 0.0005 * 0.5
    invocations = work.writes_per_s / 100 * ENGINE_CONSUMERS
    return (gb_s * PRICES["lambda_gb_s"] + invocations * PRICES["lambda_request"]) * SECONDS_PER_MONTH


def dynamodb_streams_cost(work: Workload, own_consumers: int = 0) -> SourceCost:
    """DynamoDB Streams read by the engine's Lambda triggers: the reads are free; what is paid is
    the invocations, which Kinesis pays too."""
    cost = SourceCost("dynamodb", "Lambda triggers", {
        "stream reads (free for Lambda triggers)": 0.0,
        "Lambda: the stream consumers": round(_consumer_lambda(work), 2),
    })  # fmt: skip
    if own_consumers:
        cost.notes.append(
            f"no room for {own_consumers} more reader(s): AWS advises at most {STREAM_READERS_PER_SHARD} "
            "per shard, and the write-back and the aggregation are those"
        )
    return cost


def kinesis_cost(
    work: Workload,
    shards: int | None = None,
    retention_h: float = 24,
    own_consumers: int = 0,
    fan_out: bool = True,
) -> SourceCost:
    """Kinesis Data Streams for DynamoDB: DynamoDB's change data capture units (one per write of up
    to 1 KB), then the stream, on-demand (`shards` None: stream hours, GB written, GB read) or
    provisioned (shard hours, 25 KB PUT payload units), each enhanced fan-out consumer's reads
    (`fan_out`: the engine's two and `own_consumers`), and retention past 24 hours."""
    if shards is not None and shards < 1:
        raise ValueError("a provisioned stream has at least one shard")
    if not 24 <= retention_h <= 8760:
        raise ValueError("Kinesis keeps records 24 to 8,760 hours")
    price, hours = STREAM_PRICES, HOURS_PER_MONTH
    consumers = ENGINE_CONSUMERS + own_consumers
    record_kb = kinesis_record_kb(work)
    records = work.writes_per_s * SECONDS_PER_MONTH  # one change record per write
    gb = records * record_kb / KB_PER_GB  # what the stream holds and each consumer reads
    items = {
        "DynamoDB change data capture units": records * math.ceil(work.item_kb) * price["dynamodb_cdc_unit"]
    }
    if shards is None:
        label = "on-demand"
        items["stream hours"] = hours * price["kinesis_stream_hour"]
        items["GB written"] = records * math.ceil(record_kb) / KB_PER_GB * price["kinesis_gb_ingested"]
        if fan_out:
            read = consumers * gb * price["kinesis_fan_out_gb_on_demand"]
            items[f"enhanced fan-out: GB read by {consumers} consumers"] = read
        else:
            items[f"GB read by {consumers} consumers"] = consumers * gb * price["kinesis_gb_retrieved"]
        if retention_h > 24:
            stored = gb / hours * (min(retention_h, 168) - 24)
            items["retention to 7 days (GB-month)"] = stored * price["kinesis_extended_gb_month"]
    else:
        label = f"provisioned, {shards} shard{'s' * (shards != 1)}"
        items["shard hours"] = shards * hours * price["kinesis_shard_hour"]
        units = records * math.ceil(record_kb / PUT_PAYLOAD_KB)
        items["PUT payload units (25 KB)"] = units * price["kinesis_put_payload_unit"]
        if fan_out:
            consumer_hours = consumers * shards * hours
            items[f"enhanced fan-out: {consumers} consumers' shard hours"] = (
                consumer_hours * price["kinesis_fan_out_consumer_shard_hour"]
            )
            items[f"enhanced fan-out: GB read by {consumers} consumers"] = (
                consumers * gb * price["kinesis_fan_out_gb"]
            )
        if retention_h > 24:
            items["retention to 7 days (shard hours)"] = shards * hours * price["kinesis_extended_shard_hour"]
    if retention_h > 168:
        stored = gb / hours * (retention_h - 168)
        items["retention past 7 days (GB-month)"] = stored * price["kinesis_long_term_gb_month"]
    items["Lambda: the stream consumers"] = _consumer_lambda(work)
    cost = SourceCost("kinesis", label, {k: round(v, 2) for k, v in items.items()})
    needed = kinesis_shards_needed(work)
    if shards is not None and shards < needed:
        cost.notes.append(
            f"{shards} provisioned shard(s) take 1 MB/s or 1,000 records/s each: "
            f"{work.writes_per_s:,.0f} changes/s of {record_kb:g} KB need {needed}"
        )
    if fan_out and consumers > KINESIS_FAN_OUT_CONSUMERS:
        cost.notes.append(
            f"{consumers} enhanced fan-out consumers: a stream registers at most {KINESIS_FAN_OUT_CONSUMERS}"
        )
    if not fan_out and consumers > 1:
        cost.notes.append(f"without enhanced fan-out the {consumers} consumers share each shard's 2 MB/s")
    return cost


def change_sources(work: Workload, sources: str = "both", shards: int | None = None,
                   retention_h: float = 24, own_consumers: int = 0,
                   fan_out: bool = True) -> dict[str, SourceCost]:  # fmt: skip
    """Each change source's monthly cost for `work`: `sources` is "both", "dynamodb" or "kinesis"."""
    if sources not in ("both", "dynamodb", "kinesis"):
        raise ValueError(f"change source {sources!r}: both, dynamodb or kinesis")
    costs = {}
    if sources in ("both", "dynamodb"):
        costs["dynamodb"] = dynamodb_streams_cost(work, own_consumers)
    if sources in ("both", "kinesis"):
        costs["kinesis"] = kinesis_cost(work, shards, retention_h, own_consumers, fan_out)
    return costs


def cheaper(costs: dict[str, SourceCost]) -> str:
    """One sentence: which source costs less for this workload, and why."""
    if set(costs) != {"dynamodb", "kinesis"}:
        return ""
    streams, kinesis = costs["dynamodb"], costs["kinesis"]
    extra = {k: v for k, v in kinesis.items.items() if k not in streams.items}
    top, top_usd = max(extra.items(), key=lambda kv: kv[1])
    difference = kinesis.total - streams.total
    if difference > 0:
        return (
            f"DynamoDB Streams is ${difference:,.2f}/month cheaper for this workload: Lambda reads it "
            f"for free, while Kinesis ({kinesis.label}) charges for every change and hour (its largest "
            f"line: {top}, ${top_usd:,.2f}); choose Kinesis for its consumers and retention, not its price."
        )
    return (
        f"The two cost the same for this workload (${streams.total:,.2f}/month): nothing but the "
        "Lambda invocations, which both pay."
    )


# Freshness (`-c freshness`), priced where its two settings differ: the stream consumers'
# invocations and the outbox drain's runs (Lambda requests, duration, their logs), and the
# aggregation's write units. Prices: PRICES (Lambda's and CloudWatch's pages, above). The settings'
# figures are hybridsync/truth/context.py's (FRESHNESS, BY_FRESHNESS, SETTINGS), repeated here: sizing
# sits below the CDK app (tests/unit/test_layout.py), and a test holds the two equal.
FRESHNESS = ("realtime", "economy")
# With no batching window Lambda invokes a consumer each time a read of a shard finds records: it
# reads a DynamoDB stream shard 4 times a second (lambda/latest/dg/with-ddb.html), a Kinesis shard
# once a second with a shared iterator (with-kinesis.html); an enhanced fan-out consumer is pushed
# records as they come (taken as up to 5 times a second). A batching window waits out its seconds,
# or a full batch, whichever comes first.
READS_PER_S = {"dynamodb": 4.0, "kinesis": 5.0, "kinesis shared": 1.0}
KINESIS_ON_DEMAND_SHARDS = 4  # an on-demand stream starts at 4 MB/s and 4,000 records/s: 4 shards


@dataclass(frozen=True)
class Consumer:
    window_s: dict[str, int]  # its batching window by freshness (`<setting>_batching_window_s`)
    batch: int  # its batch size (`<setting>_batch_size`)
    record_s: float  # a record's time as `plan` prices it (write-back ~2 ms, aggregation ~0.5 ms)
    memory_gb: float  # its memory (hybridsync/cdk/pipeline.py)


CONSUMERS = {
    "write_back": Consumer({"realtime": 0, "economy": 5}, 1000, 0.002, 1.0),  # `stream_...`; 1,024 MB
    "aggregate": Consumer({"realtime": 0, "economy": 30}, 5000, 0.0005, 0.5),  # HandlerFunction's 512 MB
}
INVOCATION_S = 0.010  # an assumption: a batch's own work whatever its size (its transaction, its
# cursor or positions read: a few round trips of 1-5 ms within a region), beside `plan`'s per record
# An invocation's log lines: its EMF line (Powertools: the consumers' metrics measured 525-574 bytes)
# and Lambda's START, END and REPORT lines (~350 bytes in their formats, X-Ray's trace id included).
INVOCATION_LOG_BYTES = 900
# The outbox drain (SqlSync): a schedule starts a run each `outbox_drain_minutes`. Under realtime a run
# polls until the next one takes over (hybridsync.sync.outbox.poll): one runs all month, publishing an
# EMF line a second (functions/sql_sync.py `published`: OutboxDepth, OutboxAge; measured 270 bytes).
DRAIN_PERIOD_S = 60  # `outbox_drain_minutes`: 1
DRAIN_MEMORY_GB = 0.25  # SqlSync's 256 MB (hybridsync/cdk/schedules.py DRAIN_MEMORY_MB)
DRAIN_RUN_S = 1.0  # economy: a run drains once, ~1 s
DRAIN_LINE_BYTES = 271  # the EMF line and its newline
DRAIN_LINES_PER_S = 1.0
GB_BYTES = 1024**3


@dataclass
class FreshnessCost:
    """One freshness setting's monthly cost where the settings differ: line item -> $/month, and
    the same with no traffic at all (`idle`: what the setting costs before a single change)."""

    freshness: str  # "realtime" or "economy"
    shards: int  # the stream shards priced
    items: dict[str, float]
    idle: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return round(sum(self.items.values()), 2)


def _invocations(rate: float, shards: int, window_s: float, batch: int, reads_per_s: float,
                 record_s: float) -> float:  # fmt: skip
    """A consumer's invocations a second over `shards` taking `rate` changes a second in all: on a
    shard, one a read that finds records (no window) or one a window, at most one a change and no
    more than one at a time allows (each takes `record_s` a record and INVOCATION_S), and one a
    full batch when batches fill sooner."""
    per_shard = rate / shards
    cadence = 1 / window_s if window_s else reads_per_s
    one_at_a_time = max(0.0, 1 - per_shard * record_s) / INVOCATION_S  # a shard's time left for batches
    return shards * max(min(per_shard, cadence, one_at_a_time), per_shard / batch)


def freshness_cost(work: Workload, freshness: str, shards: int = 1,
                   reads_per_s: float = READS_PER_S["dynamodb"],
                   ratios: dict[str, float] = AGGREGATE_UNITS_RATIO,
                   drain_memory_gb: float = DRAIN_MEMORY_GB) -> FreshnessCost:  # fmt: skip
    """`freshness`'s monthly cost at `work`'s rate over `shards` stream shards, each read
    `reads_per_s` times a second: the consumers' and the drain's Lambda requests, duration and logs,
    and the aggregation's write units; `idle`: the same with no traffic at all."""
    month, price = SECONDS_PER_MONTH, PRICES
    lines_per_s = work.writes_per_s * work.order_line_share
    gb_s = calls = 0.0
    for consumer, rate in zip(CONSUMERS.values(), (work.writes_per_s, lines_per_s), strict=True):
        invoked = _invocations(rate, shards, consumer.window_s[freshness], consumer.batch, reads_per_s,
                               consumer.record_s)  # fmt: skip
        calls += invoked
        # per record as `plan` prices it (at 512 MB), then per batch at the function's memory
        gb_s += rate * consumer.record_s * 0.5 + invoked * INVOCATION_S * consumer.memory_gb
    runs = month / DRAIN_PERIOD_S
    realtime = freshness == "realtime"
    per_byte = price["cloudwatch_logs_gb"] / GB_BYTES  # $ a byte
    drain_log_bytes = runs * INVOCATION_LOG_BYTES + realtime * month * DRAIN_LINES_PER_S * DRAIN_LINE_BYTES
    items = {
        "Lambda requests: the stream consumers": calls * month * price["lambda_request"],
        "Lambda duration: the stream consumers": gb_s * month * price["lambda_gb_s"],
        "logs: the stream consumers": calls * month * INVOCATION_LOG_BYTES * per_byte,
        "Lambda requests: the drain": runs * price["lambda_request"],
        "Lambda duration: the drain": (month if realtime else runs * DRAIN_RUN_S) * drain_memory_gb
        * price["lambda_gb_s"],
        "logs: the drain": drain_log_bytes * per_byte,
        "DynamoDB: the aggregation's write units": aggregation_write_units(work, freshness, ratios) * month
        * price["dynamodb_write_request_unit"],
    }  # fmt: skip
    cost = FreshnessCost(freshness, shards, {k: round(v, 2) for k, v in items.items()})
    cost.idle = freshness_cost(replace(work, writes_per_s=0.0), freshness, shards, reads_per_s, ratios,
                               drain_memory_gb).total if work.writes_per_s else cost.total  # fmt: skip
    if realtime:
        cost.notes.append("its drain holds a PostgreSQL connection all month (two while the next run "
                          "takes over), one of the connections above")  # fmt: skip
    cost.notes.append(f"the aggregation writes {ratios[freshness]:g} of a naive per-record ADD's units "
                      "(bench/freshness.py: the shop's workload, 1,000 changes/s over 4 shards)")  # fmt: skip
    return cost


def freshness_costs(work: Workload, settings: str = "both", source: str = "dynamodb",
                    kinesis_shards: int | None = None, fan_out: bool = True,
                    ratios: dict[str, float] = AGGREGATE_UNITS_RATIO,
                    ) -> dict[str, FreshnessCost]:  # fmt: skip
    """Each freshness setting's monthly cost for `work` (`settings`: "both", "realtime" or
    "economy") on the change source the consumers read: a DynamoDB stream has a shard per
    partition; a Kinesis stream the shards given, or on demand at least 4."""
    if settings not in ("both", *FRESHNESS):
        raise ValueError(f"freshness {settings!r}: both, {' or '.join(FRESHNESS)}")
    if source == "kinesis":
        shards = kinesis_shards or max(KINESIS_ON_DEMAND_SHARDS, kinesis_shards_needed(work))
        reads_per_s = READS_PER_S["kinesis" if fan_out else "kinesis shared"]
    else:
        shards, reads_per_s = partitions(work), READS_PER_S["dynamodb"]
    names = FRESHNESS if settings == "both" else (settings,)
    return {name: freshness_cost(work, name, shards, reads_per_s, ratios) for name in names}


def freshness_difference(costs: dict[str, FreshnessCost]) -> str:
    """One sentence: what realtime costs beyond economy at this rate, its largest line, and idle."""
    if set(costs) != set(FRESHNESS):
        return ""
    realtime, economy = costs["realtime"], costs["economy"]
    top, top_usd = max(
        ((k, realtime.items[k] - economy.items[k]) for k in realtime.items), key=lambda kv: kv[1]
    )
    return (
        f"realtime minus economy: ${realtime.total - economy.total:,.2f}/month at this rate (its largest "
        f"line: {top}, ${top_usd:,.2f}); idle, with no traffic at all, ${realtime.idle - economy.idle:,.2f}"
        "/month: the drain running all month."
    )
