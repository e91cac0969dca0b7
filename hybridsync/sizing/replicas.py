"""What replicas in other Regions add to `plan`'s month (issue 53): a global table's writes are
billed once in every replica, and each crosses to the others.

- **Replicated writes.** "One rWRU per replica table is charged for each write up to 1KB", and
  replicated write units "are priced the same as single-Region write units"
  ([global tables billing](https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/global-tables-billing.html)).
  Every item the app writes replicates, the aggregation's and the drain's included: each other
  Region pays the app's write units again.
- **The replicas' indexes.** Each replica's GSIs are updated in its Region, "billed using the same
  units as single-Region DynamoDB tables" (same page).
- **Cross-Region transfer.** "Cross-Region data transfer fees apply for global tables as data is
  replicated across Regions" (same page): each write's item, once per other Region, at
  `TRANSFER_USD_PER_GB`, AWS's inter-Region rate out of us-east-1 to another US Region, an
  assumption for other pairs (`--transfer-usd-per-gb`). The aggregation's items are counted at
  1 KB a write unit, their largest.

Reads and the consumers are not multiplied: reads are made where they are served, and the
consumers run at home only. Left out: storage (each replica holds every item; `plan` leaves the
home table's out too), filling a replica added to a table that holds data (billed as a restore),
and TTL's deletions, free at home but replicated writes in the other Regions.
"""

from __future__ import annotations

import math

from hybridsync.sizing.plan import PRICES, SECONDS_PER_MONTH, Plan, Workload, aggregation_write_units

TRANSFER_USD_PER_GB = 0.02
KB_PER_GB = 1_000_000


def replicas_cost(work: Workload, result: Plan, replicas: int,
                  transfer_usd_per_gb: float = TRANSFER_USD_PER_GB) -> dict[str, float]:  # fmt: skip
    """The month's extra, by component, of `replicas` other Regions holding every table (0: none);
    `result` is `plan(work)`, its aggregation priced at its freshness."""
    if replicas < 0 or transfer_usd_per_gb < 0:
        raise ValueError("replicas and the transfer price are 0 or more")
    month, unit = SECONDS_PER_MONTH, PRICES["dynamodb_write_request_unit"]
    aggregation = aggregation_write_units(work, result.freshness)
    written = result.write_units_per_s + aggregation  # write units a second, at home
    sent_kb = work.writes_per_s * work.item_kb + aggregation  # a second, to each other Region
    items = {
        "replicated writes": written * replicas * month * unit,
        "replicas' GSI writes": result.write_units_per_s * work.gsi_count * replicas * month * unit,
        "cross-Region transfer": sent_kb * replicas * month / KB_PER_GB * transfer_usd_per_gb,
    }
    items = {name: round(value, 2) for name, value in items.items()}
    return items | {"total": round(math.fsum(items.values()), 2)}
