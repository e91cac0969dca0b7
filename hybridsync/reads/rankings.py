"""Top-N reads on the write-sharded Rankings GSI: top sellers, top customers, the leaderboard.

Every ranked partition is spread over N shards (`SALES#2026-11-22#0..3`); a top-N read queries
each shard newest-first (`ScanIndexForward=False`, `Limit=N`) and merges. Ties are ordered by the
item's key, so the answer is stable, and a shard's page is extended while it ends in a tie, so no
tied item is cut off arbitrarily.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hybridsync import store
from hybridsync.convert import marshal, unmarshal
from hybridsync.model import CUSTOMER_SPEND, MAIN, PLAYER_SCORE, SALES, Entity

INDEX = MAIN.index("Rankings")
RANK_PK, RANK_SK = INDEX.partition.name, INDEX.sort.name if INDEX.sort else ""
MAX_N = 100


@dataclass(frozen=True)
class Ranked:
    score: Decimal
    item: dict[str, Any]

    @property
    def order(self) -> tuple[Decimal, str]:
        return (-self.score, self.item["PK"])


def _query_shard(client: Any, table: str, partition: str, n: int) -> list[Ranked]:
    found: list[Ranked] = []
    for page in store.pages(
        client, "query", TableName=table, IndexName=INDEX.name, KeyConditionExpression="#pk = :p",
        ExpressionAttributeNames={"#pk": RANK_PK}, ExpressionAttributeValues=marshal({":p": partition}),
        ScanIndexForward=False, Limit=n,
    ):  # fmt: skip
        found += [Ranked(item[RANK_SK], item) for item in map(unmarshal, page["Items"])]
        last = page.get("LastEvaluatedKey")
        # stop once we hold n items and the last one is not tied with what may follow
        if not last or (len(found) >= n and found[-1].score != Decimal(last[RANK_SK]["N"])):
            break
    return found


def top(client: Any, table: str, entity: Entity, values: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The n highest-ranked items of an entity's ranked partition (for these values, e.g. a
    period), merged across its shards."""
    if not 1 <= n <= MAX_N:
        raise ValueError(f"n must be between 1 and {MAX_N}, got {n}")
    partitions = entity.partitions(RANK_PK, values)
    candidates = [r for p in partitions for r in _query_shard(client, table, p, n)]
    return [r.item for r in heapq.nsmallest(n, candidates, key=lambda r: r.order)]


def period_of(day: str | None = None, month: str | None = None) -> str:
    """`--day 2026-11-22` or `--month 2026-11`, validated."""
    import datetime as dt

    if (day is None) == (month is None):
        raise ValueError("give exactly one of day (YYYY-MM-DD) or month (YYYY-MM)")
    text, form = (day, "%Y-%m-%d") if day else (month, "%Y-%m")
    try:
        dt.datetime.strptime(str(text), form)
    except ValueError:
        raise ValueError(
            f"{'day' if day else 'month'} must look like {form.replace('%', '')}: {text!r}"
        ) from None
    return str(text)


def top_sellers(client: Any, table: str, period: str, n: int = 10) -> list[dict[str, Any]]:
    return top(client, table, SALES, {"Period": period}, n)


def top_customers(client: Any, table: str, month: str, n: int = 10) -> list[dict[str, Any]]:
    return top(client, table, CUSTOMER_SPEND, {"Period": month}, n)


def leaderboard(client: Any, table: str, n: int = 10) -> list[dict[str, Any]]:
    return top(client, table, PLAYER_SCORE, {}, n)


def player(client: Any, table: str, player_id: str, neighbours: int = 2) -> dict[str, Any] | None:
    """A player's score, rank (1 = best) and the `neighbours` players just above and below."""
    got = client.get_item(TableName=table, Key=marshal(PLAYER_SCORE.key({"PlayerId": player_id})))
    if "Item" not in got:
        return None
    me = unmarshal(got["Item"])
    score = me["Score"]
    nearby: dict[str, Ranked] = {}
    better = 0
    for partition in PLAYER_SCORE.partitions(RANK_PK):
        common = {"TableName": table, "IndexName": INDEX.name,
                  "ExpressionAttributeNames": {"#pk": RANK_PK, "#sk": RANK_SK},
                  "ExpressionAttributeValues": marshal({":p": partition, ":s": score})}  # fmt: skip
        count = client.query(**common, KeyConditionExpression="#pk = :p AND #sk > :s", Select="COUNT")
        better += count["Count"]
        for condition, forward in (("#sk >= :s", True), ("#sk <= :s", False)):
            page = client.query(**common, KeyConditionExpression=f"#pk = :p AND {condition}",
                                ScanIndexForward=forward, Limit=neighbours + 1)  # fmt: skip
            for item in map(unmarshal, page["Items"]):
                nearby[item["PlayerId"]] = Ranked(item[RANK_SK], item)
    ordered = sorted(nearby.values(), key=lambda r: r.order)
    at = next(i for i, r in enumerate(ordered) if r.item["PlayerId"] == player_id)
    return {
        "PlayerId": player_id,
        "Score": score,
        "Rank": better + 1,  # players with the same score share a rank
        "Above": [r.item for r in ordered[max(0, at - neighbours) : at]],
        "Below": [r.item for r in ordered[at + 1 : at + 1 + neighbours]],
    }
