"""SQL -> DynamoDB: drain the transactional outbox into version-guarded DynamoDB writes.

Triggers (see hybridsync.migrations) write one outbox row per change of a table mastered in PostgreSQL, in
the changing transaction. A drain claims a bounded batch (`FOR UPDATE SKIP LOCKED`, so drainers
never share rows), keeps the newest change per key, writes each to DynamoDB with a condition that
never replaces a newer version, and deletes the claimed rows in the same transaction as the claim.
A crash before that commit leaves the rows to the next drain, whose writes are then no-ops in
effect; nothing is lost and nothing applied twice. Items carry the origin `sql`, so the write-back
never sends them back. Each entity's view goes to its own table (`tables`: logical -> physical).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from hybridsync import store
from hybridsync.convert import item_values
from hybridsync.declare import Entity, Model, Side
from hybridsync.views import CACHE_TTL_S, TOMBSTONE_TTL_S, missing_item, view_item

CHANNEL = "hybridsync_outbox"
WRITERS = 16  # concurrent DynamoDB writes per drain


def mastered_tables(model: Model) -> dict[str, Entity]:
    """SQL table -> the entity mastered in PostgreSQL that it holds (what the outbox names)."""
    return {e.sql_table: e for e in model.mastered_in(Side.POSTGRESQL) if e.sql_table}


@dataclass
class Drained:
    claimed: int = 0
    applied: int = 0  # writes DynamoDB accepted
    superseded: int = 0  # DynamoDB already held the same or a newer version
    oldest_age_s: float = 0.0  # how long the oldest claimed change waited

    def add(self, step: Drained) -> Drained:
        self.claimed += step.claimed
        self.applied += step.applied
        self.superseded += step.superseded
        self.oldest_age_s = max(self.oldest_age_s, step.oldest_age_s)
        return step


def _exact_json(text: str | None) -> Any:
    return None if text is None else json.loads(text, parse_float=Decimal)


def put_view(
    client: Any, table: str, entity: Entity, values: dict[str, Any], version: int, ttl_s: int = CACHE_TTL_S
) -> bool:
    """Write the view of a row unless DynamoDB holds the same or a newer version of it."""
    item = view_item(entity, values, version, now=int(time.time()), ttl_s=ttl_s)
    return store.put_if_newer(client, table, entity, item)


def put_tombstone(client: Any, table: str, entity: Entity, key_values: dict[str, Any], version: int) -> bool:
    """Replace the view by a short-lived "no such row" marker carrying the delete's version, so a
    populate that read the row before the delete cannot bring it back."""
    item = missing_item(entity, key_values, version, now=int(time.time()), ttl_s=TOMBSTONE_TTL_S)
    return store.put_if_newer(client, table, entity, item)


def _apply(client: Any, model: Model, tables: Mapping[str, str], row: Any) -> bool:
    entity = mastered_tables(model)[row.table_name]
    table = tables[entity.table.name]
    if row.operation == "DELETE":
        return put_tombstone(
            client, table, entity, item_values(entity, _exact_json(row.row_key)), row.version
        )
    return put_view(client, table, entity, item_values(entity, _exact_json(row.payload)), row.version)


def drain(engine: sa.Engine, client: Any, model: Model, tables: Mapping[str, str], *,
          limit: int = 500) -> Drained:  # fmt: skip
    """Apply up to `limit` outbox rows, oldest first; returns what happened."""
    result = Drained()
    with engine.begin() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, table_name, operation, row_key::text AS row_key, version, "
                "payload::text AS payload, extract(epoch FROM now() - created_at) AS age "
                "FROM outbox ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED"
            ),
            {"n": limit},
        ).all()
        if not rows:
            return result
        result.claimed = len(rows)
        result.oldest_age_s = float(max(r.age for r in rows))
        latest: dict[tuple[str, str], Any] = {}
        for row in rows:  # the newest change per key is the only one that matters
            slot = (row.table_name, row.row_key)
            if slot not in latest or row.version >= latest[slot].version:
                latest[slot] = row
        # One key per write and the version guard on each: the writes are independent, so they go
        # out concurrently (a conditional write cannot be batched).
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            outcomes = list(pool.map(lambda row: _apply(client, model, tables, row), latest.values()))
        result.applied = sum(outcomes)
        result.superseded = len(outcomes) - result.applied
        conn.execute(sa.text("DELETE FROM outbox WHERE id = ANY(:ids)"), {"ids": [r.id for r in rows]})
    return result


def drain_all(engine: sa.Engine, client: Any, model: Model, tables: Mapping[str, str], *,
              limit: int = 500) -> Drained:  # fmt: skip
    """Drain until the outbox is empty (of rows no other drainer holds)."""
    total = Drained()
    while total.add(drain(engine, client, model, tables, limit=limit)).claimed:
        pass
    return total


def listen_and_drain(
    url: str,
    client: Any,
    model: Model,
    tables: Mapping[str, str],
    stop: threading.Event,
    *,
    idle_s: float = 5.0,
    dropped: Callable[[], bool] = lambda: False,
) -> None:
    """Locally: drain whenever PostgreSQL NOTIFYs the outbox channel (and every `idle_s` anyway:
    a NOTIFY is lost when the listener is reconnecting), until `stop` is set; reconnects if
    PostgreSQL restarts. `dropped()` says whether to ignore a NOTIFY (a fault, injected). In AWS
    the schedule (and an invoke after commit) does this."""
    import psycopg

    from hybridsync import db

    engine = db.create_engine(url)
    try:
        while not stop.is_set():
            try:
                with psycopg.connect(db.sqlalchemy_url(url).replace("+psycopg", ""), autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    while not stop.is_set():
                        drain_all(engine, client, model, tables)
                        deadline = time.monotonic() + idle_s
                        while (left := deadline - time.monotonic()) > 0:
                            heard = next(iter(conn.notifies(timeout=left, stop_after=1)), None)
                            if heard is None or not dropped():
                                break
            except (psycopg.OperationalError, sa.exc.OperationalError):
                if not stop.is_set():
                    logging.getLogger(__name__).warning("outbox drainer lost PostgreSQL; retrying in 2 s")
                    stop.wait(2)
    finally:
        engine.dispose()
