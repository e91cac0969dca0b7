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

from boto3.dynamodb.types import TypeDeserializer

from hybridsync import keys, store
from hybridsync.model import LEADERBOARD_SHARDS, PLAYER_SCORE, RANKING_SHARDS

INDEX = "Rankings"
MAX_N = 100
_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class Ranked:
    score: Decimal
    item: dict[str, Any]

    @property
    def order(self) -> tuple[Decimal, str]:
        return (-self.score, self.item["PK"])


def _query_shard(client: Any, table: str, partition: str, n: int) -> list[Ranked]:
    found: list[Ranked] = []
    request: dict[str, Any] = {
        "TableName": table,
        "IndexName": INDEX,
        "KeyConditionExpression": "RankPK = :p",
        "ExpressionAttributeValues": {":p": {"S": partition}},
        "ScanIndexForward": False,
        "Limit": n,
    }
    while True:
        page = client.query(**request)
        found += [
            Ranked(Decimal(i["RankSK"]["N"]), {k: _deserializer.deserialize(v) for k, v in i.items()})
            for i in page["Items"]
        ]
        last = page.get("LastEvaluatedKey")
        # stop once we hold n items and the last one is not tied with what may follow
        if not last or (len(found) >= n and found[-1].score != Decimal(last["RankSK"]["N"])):
            return found
        request["ExclusiveStartKey"] = last


def top(client: Any, table: str, prefix: str, shards: int, n: int) -> list[dict[str, Any]]:
    """The n highest-ranked items of a sharded partition, merged across its shards."""
    if not 1 <= n <= MAX_N:
        raise ValueError(f"n must be between 1 and {MAX_N}, got {n}")
    candidates = [r for p in keys.all_shards(prefix, shards) for r in _query_shard(client, table, p, n)]
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
    return top(client, table, f"SALES#{period}", RANKING_SHARDS, n)


def top_customers(client: Any, table: str, month: str, n: int = 10) -> list[dict[str, Any]]:
    return top(client, table, f"SPEND#{month}", RANKING_SHARDS, n)


def leaderboard(client: Any, table: str, n: int = 10) -> list[dict[str, Any]]:
    return top(client, table, "LEADERBOARD", LEADERBOARD_SHARDS, n)


def player(client: Any, table: str, player_id: str, neighbours: int = 2) -> dict[str, Any] | None:
    """A player's score, rank (1 = best) and the `neighbours` players just above and below."""
    got = client.get_item(TableName=table, Key=store.marshal(PLAYER_SCORE.key({"PlayerId": player_id})))
    if "Item" not in got:
        return None
    me = store.unmarshal(got["Item"])
    score = me["Score"]
    nearby: dict[str, Ranked] = {}
    better = 0
    for partition in keys.all_shards("LEADERBOARD", LEADERBOARD_SHARDS):
        common = {"TableName": table, "IndexName": INDEX}
        values = {":p": {"S": partition}, ":s": {"N": str(score)}}
        count = client.query(**common, KeyConditionExpression="RankPK = :p AND RankSK > :s",
                             ExpressionAttributeValues=values, Select="COUNT")  # fmt: skip
        better += count["Count"]
        for condition, forward in (("RankSK >= :s", True), ("RankSK <= :s", False)):
            page = client.query(**common, KeyConditionExpression=f"RankPK = :p AND {condition}",
                                ExpressionAttributeValues=values, ScanIndexForward=forward,
                                Limit=neighbours + 1)  # fmt: skip
            for i in page["Items"]:
                nearby[i["PlayerId"]["S"]] = Ranked(Decimal(i["RankSK"]["N"]), store.unmarshal(i))
    ordered = sorted(nearby.values(), key=lambda r: r.order)
    at = next(i for i, r in enumerate(ordered) if r.item["PlayerId"] == player_id)
    return {
        "PlayerId": player_id,
        "Score": score,
        "Rank": better + 1,  # players with the same score share a rank
        "Above": [r.item for r in ordered[max(0, at - neighbours) : at]],
        "Below": [r.item for r in ordered[at + 1 : at + 1 + neighbours]],
    }
