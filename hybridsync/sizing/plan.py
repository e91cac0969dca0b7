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
