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
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

PRICES_AS_OF = "2026-11-01"  # us-east-1 list prices
PRICES = {
    "dynamodb_write_request_unit": 0.625 / 1e6,  # on demand, per write request unit
    "dynamodb_read_request_unit": 0.125 / 1e6,  # on demand, per read request unit
    "lambda_gb_s": 0.0000166667,
    "lambda_request": 0.20 / 1e6,
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


def plan(work: Workload, declared_shards: dict[str, int] | None = None) -> Plan:
    """The pipeline at `work`'s rate; `declared_shards` (a GSI key's name -> its `Sharded(n)`)
    are checked against what the rate needs."""
    wu = math.ceil(work.item_kb)  # write units per write
    write_units = work.writes_per_s * wu
    partitions = max(1, math.ceil(write_units / PARTITION_WRITE_UNITS),
                     math.ceil(work.reads_per_s / PARTITION_READ_UNITS))  # fmt: skip
    shards = partitions  # at least one stream shard per partition
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
    aggregate_wu = lines_per_s / 50 * 3 * 2  # per ~50-record batch: journal, chunk, cleanup; transactional
    month = SECONDS_PER_MONTH
    monthly = {
        "dynamodb_writes": write_units * month * PRICES["dynamodb_write_request_unit"],
        "dynamodb_reads": work.reads_per_s * month * PRICES["dynamodb_read_request_unit"] * 0.5,
        "gsi_writes": write_units * work.gsi_count * month * PRICES["dynamodb_write_request_unit"],
        "aggregation_overhead": aggregate_wu * month * PRICES["dynamodb_write_request_unit"],
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
    return Plan(asdict(work), write_units, partitions, shards, concurrency, pg_connections, acu, gsi_shards,
                notes, round(gb_s_month), monthly)  # fmt: skip


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
    mb_per_s = work.writes_per_s * record_kb / 1024
    needed = max(1, math.ceil(mb_per_s / SHARD_WRITE_MB), math.ceil(work.writes_per_s / SHARD_WRITE_RECORDS))
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
