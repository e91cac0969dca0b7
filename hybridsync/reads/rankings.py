"""Top-N reads on a write-sharded ranking GSI: a declared aggregate's top items per period (top
sellers, top customers), or any entity ranked by a copied attribute (a leaderboard).

Every ranked partition is spread over N shards (`SALES#2026-11-22#0..3`); a top-N read queries
each shard highest-first (`ScanIndexForward=False`, `Limit=N`) and merges. Ties are ordered by the
item's key, so the answer is stable, and a shard's page is extended while it ends in a tie, so no
tied item is cut off arbitrarily.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from hybridsync.dynamodb import store
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import PERIOD, Aggregate, Entity, Index, Period

MAX_N = 100


@dataclass(frozen=True)
class Ranked:
    score: Decimal
    item: dict[str, Any]
    partition_key: str

    @property
    def order(self) -> tuple[Decimal, str]:
        return (-self.score, str(self.item[self.partition_key]))


def _names(entity: Entity, index: Index) -> tuple[str, str]:
    if index.sort is None:
        raise ValueError(f"index {index.name} has no sort key to rank by")
    return index.partition.name, index.sort.name


def _query_shard(
    client: Any, table: str, entity: Entity, index: Index, partition: str, n: int
) -> list[Ranked]:
    rank_pk, rank_sk = _names(entity, index)
    pk = entity.table.partition.name
    found: list[Ranked] = []
    for page in store.pages(
        client,
        "query",
        TableName=table,
        IndexName=index.name,
        KeyConditionExpression="#pk = :p",
        ExpressionAttributeNames={"#pk": rank_pk},
        ExpressionAttributeValues=marshal({":p": partition}),
        ScanIndexForward=False,
        Limit=n,
    ):
        found += [Ranked(item[rank_sk], item, pk) for item in map(unmarshal, page["Items"])]
        last = page.get("LastEvaluatedKey")
        # stop once we hold n items and the last one is not tied with what may follow
        if not last or (len(found) >= n and found[-1].score != Decimal(last[rank_sk]["N"])):
            break
    return found


def _check_n(n: int) -> None:
    if not 1 <= n <= MAX_N:
        raise ValueError(f"n must be between 1 and {MAX_N}, got {n}")


def top(
    client: Any, table: str, entity: Entity, index: str, values: dict[str, Any], n: int
) -> list[dict[str, Any]]:
    """The n highest-ranked items of an entity's ranked partition in `index` (for these values,
    e.g. a period), merged across its shards."""
    _check_n(n)
    found = entity.table.index(index)
    partitions = entity.partitions(found.partition.name, values)
    candidates = [r for p in partitions for r in _query_shard(client, table, entity, found, p, n)]
    return [r.item for r in heapq.nsmallest(n, candidates, key=lambda r: r.order)]


def top_of(client: Any, table: str, aggregate: Aggregate, period: str, n: int = 10) -> list[dict[str, Any]]:
    """A ranked aggregate's n highest items of a period (a day `2026-11-22`, a month `2026-11`)."""
    if aggregate.rank is None:
        raise ValueError(f"aggregate {aggregate.name} declares no rank")
    return top(client, table, aggregate.entity, aggregate.rank.index, {PERIOD: period}, n)


def period_of(
    day: str | None = None,
    month: str | None = None,
    *,
    periods: tuple[Period, ...] = (Period.DAY, Period.MONTH),
) -> str:
    """`--day 2026-11-22` or `--month 2026-11`, validated against the periods an aggregate keeps."""
    if (day is None) == (month is None):
        raise ValueError("give exactly one of day (YYYY-MM-DD) or month (YYYY-MM)")
    period, text = (Period.DAY, day) if day is not None else (Period.MONTH, month)
    if period not in periods:
        raise ValueError(f"{period.value}: this aggregate is kept by {', '.join(periods)} only")
    # the label as the aggregates write it, zero-padded and ASCII (strptime alone takes `2026-1` or
    # `2026-11-5`, which no partition holds: an empty answer instead of a 400)
    shape = (
        re.escape(period.format).replace("%Y", "[0-9]{4}").replace("%m", "[0-9]{2}").replace("%d", "[0-9]{2}")
    )
    try:
        if not re.fullmatch(shape, str(text)):
            raise ValueError
        datetime.strptime(str(text), period.format)
    except ValueError:
        raise ValueError(
            f"{period.value} must look like {period.format.replace('%', '')}: {text!r}"
        ) from None
    return str(text)


def neighbours_of(
    client: Any, table: str, entity: Entity, index: str, key_values: dict[str, Any], neighbours: int = 2
) -> dict[str, Any] | None:
    """An item's rank in `index` (1 = best; equal scores share a rank) and the `neighbours` items
    just above and below it, across every shard; None when there is no such item."""
    found = entity.table.index(index)
    rank_pk, rank_sk = _names(entity, found)
    pk = entity.table.partition.name
    got = client.get_item(TableName=table, Key=marshal(entity.key(key_values)))
    if "Item" not in got:
        return None
    me = unmarshal(got["Item"])
    score = me[rank_sk]
    nearby: dict[str, Ranked] = {}
    better = 0
    for partition in entity.partitions(rank_pk, me):
        common = {
            "TableName": table,
            "IndexName": found.name,
            "ExpressionAttributeNames": {"#pk": rank_pk, "#sk": rank_sk},
            "ExpressionAttributeValues": marshal({":p": partition, ":s": score}),
        }
        count = client.query(**common, KeyConditionExpression="#pk = :p AND #sk > :s", Select="COUNT")
        better += count["Count"]
        for condition, forward in (("#sk >= :s", True), ("#sk <= :s", False)):
            page = client.query(
                **common,
                KeyConditionExpression=f"#pk = :p AND {condition}",
                ScanIndexForward=forward,
                Limit=neighbours + 1,
            )
            for item in map(unmarshal, page["Items"]):
                nearby[str(item[pk])] = Ranked(item[rank_sk], item, pk)
    ordered = sorted(nearby.values(), key=lambda r: r.order)
    at = next(i for i, r in enumerate(ordered) if r.item[pk] == me[pk])
    return {
        "item": me,
        "rank": better + 1,
        "above": [r.item for r in ordered[max(0, at - neighbours) : at]],
        "below": [r.item for r in ordered[at + 1 : at + 1 + neighbours]],
    }
