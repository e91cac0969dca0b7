"""The shop's top-N reads: top sellers and top customers (its declared aggregates, ranked by units
and by loyalty points), and the game leaderboard (player scores ranked by a copied attribute),
each on the write-sharded `Rankings` GSI through the engine's `hybridsync.reads.rankings`."""

from __future__ import annotations

from typing import Any

from hybridsync.reads import rankings
from shop.model import PLAYER_SCORE, SALES_BY_PRODUCT, SPEND_BY_CUSTOMER

INDEX = "Rankings"


def top_sellers(client: Any, table: str, period: str, n: int = 10) -> list[dict[str, Any]]:
    return rankings.top_of(client, table, SALES_BY_PRODUCT, period, n)


def top_customers(client: Any, table: str, month: str, n: int = 10) -> list[dict[str, Any]]:
    return rankings.top_of(client, table, SPEND_BY_CUSTOMER, month, n)


def leaderboard(client: Any, table: str, n: int = 10) -> list[dict[str, Any]]:
    return rankings.top(client, table, PLAYER_SCORE, INDEX, {}, n)


def player(client: Any, table: str, player_id: str, neighbours: int = 2) -> dict[str, Any] | None:
    """A player's score, rank (1 = best; equal scores share one) and the players just above and below."""
    found = rankings.neighbours_of(client, table, PLAYER_SCORE, INDEX, {"PlayerId": player_id}, neighbours)
    if found is None:
        return None
    return {"PlayerId": player_id, "Score": found["item"]["Score"], "Rank": found["rank"],
            "Above": found["above"], "Below": found["below"]}  # fmt: skip
