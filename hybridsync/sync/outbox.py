"""SQL -> DynamoDB: drain the transactional outbox into version-guarded DynamoDB writes.

Triggers (see hybridsync.sql.migrations) write one outbox row per change of a table mastered in PostgreSQL, in
the changing transaction. A drain claims a bounded batch (`FOR UPDATE SKIP LOCKED`, so drainers
never share rows), keeps the newest change per key, writes each to DynamoDB with a condition that
never replaces a newer version, and deletes the claimed rows in the same transaction as the claim.
A crash before that commit leaves the rows to the next drain, whose writes are then no-ops in
effect; nothing is lost and nothing applied twice. A row no write can ever apply goes to the
dead-letter store with its reason (in the same transaction) and never holds up the others; a row
DynamoDB refuses for now waits for the next drain. Items carry the origin `sql`, so the write-back
never sends them back. Each entity's view goes to its own table (`tables`: logical -> physical).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from botocore.exceptions import BotoCoreError, ClientError

from hybridsync.dynamodb import store
from hybridsync.dynamodb.views import CACHE_TTL_S, TOMBSTONE_TTL_S, missing_item, view_item
from hybridsync.model.convert import item_values
from hybridsync.model.declare import Entity, Model, Side
from hybridsync.model.errors import Rejected
from hybridsync.sql import deadletters
from hybridsync.streams.records import DeadLetter

log = logging.getLogger(__name__)
WRITERS = 16  # concurrent DynamoDB writes per drain


def mastered_tables(model: Model) -> dict[str, Entity]:
    """SQL table -> the entity mastered in PostgreSQL that it holds (what the outbox names)."""
    return {e.sql_table: e for e in model.mastered_in(Side.POSTGRESQL) if e.sql_table}


SOURCE = "sql_sync"  # the dead letters of the drain (`hybridsync dead-letters list --source sql_sync`)
# DynamoDB answers that say "not now": the row stays in the outbox for the next drain (the SDK has
# already retried them with backoff); never dead-lettered.
TRANSIENT_CODES = frozenset({
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "InternalServerError", "ServiceUnavailable", "LimitExceededException",
})  # fmt: skip
# Answers that say the drain itself is misconfigured (its role, its tables): no row is to blame, so
# the drain fails whole and every row waits for the fix.
CONFIGURATION_CODES = frozenset({
    "AccessDeniedException", "ResourceNotFoundException", "UnrecognizedClientException",
    "InvalidSignatureException", "MissingAuthenticationTokenException", "ExpiredTokenException",
})  # fmt: skip


@dataclass
class Drained:
    claimed: int = 0
    applied: int = 0  # writes DynamoDB accepted
    superseded: int = 0  # DynamoDB already held the same or a newer version
    dead_lettered: int = 0  # rows no write can apply: in the dead-letter store, out of the outbox
    deferred: int = 0  # rows whose write failed for now (throttled, unreachable): left for the next drain
    oldest_age_s: float = 0.0  # how long the oldest claimed change waited
    freshness_s: float = 0.0  # how long the oldest claimed change took until its view was written
    rejected: list[DeadLetter] = field(default_factory=list)  # this drain's dead letters (for the logs)
    # each claimed row, its fate and how long it waited: its trail entry is built only when logged
    fates: list[tuple[Change, str | None, float]] = field(default_factory=list)

    def add(self, step: Drained) -> Drained:
        for name in ("claimed", "applied", "superseded", "dead_lettered", "deferred"):
            setattr(self, name, getattr(self, name) + getattr(step, name))
        self.oldest_age_s = max(self.oldest_age_s, step.oldest_age_s)
        self.freshness_s = max(self.freshness_s, step.freshness_s)
        self.rejected += step.rejected
        self.fates += step.fates
        return step


@dataclass
class Backlog:
    """What waits in the outbox: rows, and how long the oldest has waited (0 when empty)."""

    depth: int
    oldest_age_s: float


BACKLOG = sa.text("SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM outbox")


def backlog(engine: sa.Engine) -> Backlog:
    with engine.connect() as conn:
        depth, age = conn.execute(BACKLOG).one()
    return Backlog(int(depth), float(age))


def exact_json(text: str | None) -> Any:
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


@dataclass(frozen=True)
class Change:
    """One outbox row: a change of a row of a table mastered in PostgreSQL."""

    id: int
    table_name: str
    operation: str  # INSERT | UPDATE | DELETE
    key: dict[str, Any]  # the row's key columns
    version: int
    payload: dict[str, Any] | None  # the whole row (none for a DELETE)

    @classmethod
    def parsed(cls, id: int, table_name: str, operation: str, key: str, version: int,
               payload: str | None) -> Change:  # fmt: skip
        """From the row's JSON as text, numbers exact."""
        return cls(id, table_name, operation, exact_json(key), version, exact_json(payload))

    def record(self) -> dict[str, Any]:
        """As its dead letter holds it."""
        return {"outbox_id": self.id, "table_name": self.table_name, "operation": self.operation,
                "row_key": self.key, "version": self.version, "payload": self.payload}  # fmt: skip


def _apply(client: Any, model: Model, tables: Mapping[str, str], change: Change) -> bool:
    entity = mastered_tables(model).get(change.table_name)
    if entity is None:
        raise Rejected(f"table {change.table_name} holds no entity mastered in PostgreSQL")
    table = tables[entity.table.name]
    if change.operation == "DELETE":
        return put_tombstone(client, table, entity, item_values(entity, change.key), change.version)
    if not isinstance(change.payload, dict):
        raise Rejected(f"{change.operation} of {change.table_name} without the row")
    return put_view(client, table, entity, item_values(entity, change.payload), change.version)


def _superseded(client: Any, model: Model, tables: Mapping[str, str], change: Change) -> bool:
    """Whether DynamoDB holds the change's view at its version or a newer one already."""
    entity = mastered_tables(model).get(change.table_name)
    if entity is None:
        return False
    held = store.get(client, tables[entity.table.name], entity.key(item_values(entity, change.key)))
    return held is not None and int(held.get(entity.names.version, -1)) >= change.version


class Deferred(Exception):
    """A write DynamoDB refused for now: the row waits in the outbox."""


def _why(error: Exception) -> str:
    """Why a row can never be applied, in a line (or raises `Deferred`, or the error itself when
    the drain, not the row, is at fault)."""
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400)
        if code in TRANSIENT_CODES or status >= 500:
            raise Deferred(code or str(status)) from error
        if code in CONFIGURATION_CODES:
            raise error
        return f"DynamoDB refused the view: {code}: {error.response.get('Error', {}).get('Message', '')}"
    if isinstance(error, BotoCoreError):  # the network, a timeout: the SDK gave up retrying
        raise Deferred(type(error).__name__) from error
    if isinstance(error, Rejected):
        return error.reason
    return f"the view cannot be built: {type(error).__name__}: {error}"


@dataclass
class _Settled:
    """What became of one key's claimed rows (newest first)."""

    done: list[int] = field(default_factory=list)  # applied, superseded or dead-lettered: leave the outbox
    letters: list[tuple[Change, str]] = field(default_factory=list)  # (row, reason)
    applied: int = 0
    superseded: int = 0
    deferred: int = 0
    fates: dict[int, str] = field(
        default_factory=dict
    )  # row id -> applied, superseded, dead letter, deferred


def _settle(client: Any, model: Model, tables: Mapping[str, str], rows: list[Change]) -> _Settled:
    """Apply the newest of a key's rows; a row no write can apply becomes a dead letter and the
    next-newest is tried in its place, as a row-by-row pass in order would leave the view. The rows
    older than the one applied are superseded by it."""
    settled = _Settled()
    for position, row in enumerate(rows):
        try:
            written = _apply(client, model, tables, row)
        except Exception as error:
            try:
                reason = _why(error)
            except Deferred:
                settled.deferred = len(rows) - position
                settled.fates |= {r.id: "deferred" for r in rows[position:]}
                return settled
            settled.letters.append((row, reason))
            settled.done.append(row.id)
            settled.fates[row.id] = "dead letter"
            continue
        settled.applied, settled.superseded = int(written), int(not written)
        settled.done += [r.id for r in rows[position:]]
        settled.superseded += len(rows) - position - 1
        settled.fates |= {r.id: "superseded" for r in rows[position + 1 :]}
        settled.fates[row.id] = "applied" if written else "superseded"
        return settled
    return settled


@contextlib.contextmanager
def _transaction(bind: sa.Engine | sa.Connection) -> Iterator[sa.Connection]:
    """A transaction of a new connection of an engine, or of a connection given."""
    if isinstance(bind, sa.Engine):
        with bind.begin() as conn:
            yield conn
    else:
        with bind.begin():
            yield bind


def drain(engine: sa.Engine | sa.Connection, client: Any, model: Model, tables: Mapping[str, str], *,
          limit: int = 500) -> Drained:  # fmt: skip
    """Apply up to `limit` outbox rows, oldest first; returns what happened. A row no write can
    apply (a view over DynamoDB's 400 KB, a number past its 38 digits) goes to the dead-letter store
    with its reason and leaves the outbox; the rest are applied all the same. A write DynamoDB
    refuses for now leaves its key's rows for the next drain. A misconfigured drain (no access to
    its table) or an unexpected failure raises, and the claim rolls back whole. On a connection
    (the polling drain's own session), one transaction of it."""
    result = Drained()
    with _transaction(engine) as conn:
        claimed_at = time.monotonic()
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
        per_key: dict[tuple[str, str], list[Change]] = defaultdict(list)
        for row in rows:
            per_key[(row.table_name, row.row_key)].append(
                Change.parsed(row.id, row.table_name, row.operation, row.row_key, row.version, row.payload)
            )
        # newest first (of equal versions the later change); only the newest matters unless it fails
        chains = [sorted(group, key=lambda r: (r.version, r.id), reverse=True) for group in per_key.values()]
        # One key per write and the version guard on each: the writes are independent, so they go
        # out concurrently (a conditional write cannot be batched).
        with ThreadPoolExecutor(max_workers=WRITERS) as pool:
            outcomes = list(pool.map(lambda chain: _settle(client, model, tables, chain), chains))
        letters = [letter for o in outcomes for letter in o.letters]
        if letters:
            _store_dead_letters(conn, letters)
        done = [row_id for o in outcomes for row_id in o.done]
        conn.execute(sa.text("DELETE FROM outbox WHERE id = ANY(:ids)"), {"ids": done})
        result.applied = sum(o.applied for o in outcomes)
        result.superseded = sum(o.superseded for o in outcomes)
        result.deferred = sum(o.deferred for o in outcomes)
        result.dead_lettered = len(letters)
        result.rejected = [DeadLetter(change.record(), reason) for change, reason in letters]
        fates = {row_id: fate for o in outcomes for row_id, fate in o.fates.items()}
        waited = {row.id: float(row.age) for row in rows}
        result.fates = [(r, fates.get(r.id), waited[r.id]) for chain in chains for r in chain]
        # the oldest change's trip: from its transaction's start (the row's created_at, now() in the
        # trigger) until its view was written
        result.freshness_s = result.oldest_age_s + (time.monotonic() - claimed_at)
    return result


def trailed(model: Model, tables: Mapping[str, str], drained: Drained) -> list[dict[str, Any]]:
    """Each claimed row as the trail names it (hybridsync.streams.trail, for `hybridsync trace`):
    its view's item (when its key makes one), its fate, how long it waited."""
    from hybridsync.streams import trail

    entries = []
    for row, fate, waited_s in drained.fates:
        entity = mastered_tables(model).get(row.table_name)
        try:
            key = entity.key(item_values(entity, row.key)) if entity else None
        except Exception:  # a row no view can be made of: its dead letter says why
            key = None
        physical = tables.get(entity.table.name) if entity else None
        entries.append({"table": physical, "item": trail.item(key) if key else None, "outbox": row.id,
                        "operation": row.operation, "version": row.version, "fate": fate,
                        "waited_s": round(waited_s, 3)})  # fmt: skip
    return entries


def _store_dead_letters(conn: sa.Connection, letters: list[tuple[Change, str]]) -> None:
    """The rows as dead letters, built by PostgreSQL from the outbox rows themselves (their JSON
    kept exactly: a number past DynamoDB's range is the reason, it must survive as it was)."""
    conn.execute(
        sa.text(
            "INSERT INTO dead_letters (source, event_id, reason, record) "
            "SELECT :source, 'outbox:' || o.id, r.reason, json_build_object('outbox_id', o.id, "
            "'table_name', o.table_name, 'operation', o.operation, 'row_key', o.row_key, "
            "'version', o.version, 'payload', o.payload) "
            "FROM outbox o JOIN unnest(CAST(:ids AS bigint[]), CAST(:reasons AS text[])) AS r(id, reason) "
            "ON o.id = r.id ON CONFLICT ON CONSTRAINT uq_dead_letters_source_event DO NOTHING"
        ),
        {"source": SOURCE, "ids": [row.id for row, _ in letters], "reasons": [why for _, why in letters]},
    )


def drain_all(engine: sa.Engine, client: Any, model: Model, tables: Mapping[str, str], *,
              limit: int = 500) -> Drained:  # fmt: skip
    """Drain until the outbox is empty (of rows no other drainer holds), or until a drain leaves
    rows for later (DynamoDB refused them for now: the next drain retries them)."""
    total = Drained()
    while True:
        step = total.add(drain(engine, client, model, tables, limit=limit))
        if not step.claimed or step.deferred:
            return total


def redrive(engine: sa.Engine, client: Any, model: Model, tables: Mapping[str, str],
            ids: list[int] | None = None) -> tuple[int, list[DeadLetter]]:  # fmt: skip
    """Apply pending drain dead letters again (after a fix to the data or the model): each goes
    through the same version guard, so one whose row has changed since is superseded, and counts
    as landed. The ones that land are marked redriven; the rest stay pending with their reason."""
    query = (
        "SELECT id, record::text AS record FROM dead_letters WHERE source = :source "
        "AND redriven_at IS NULL" + (" AND id = ANY(:ids)" if ids else "") + " ORDER BY id"
    )
    with engine.connect() as conn:
        pending = conn.execute(sa.text(query), {"source": SOURCE, "ids": ids}).all()
    landed, still = [], []
    for letter in pending:
        record = exact_json(letter.record)
        try:
            change = Change(record["outbox_id"], record["table_name"], record["operation"],
                            record["row_key"], int(record["version"]), record["payload"])  # fmt: skip
            if not _superseded(client, model, tables, change):
                _apply(client, model, tables, change)
            landed.append(letter.id)
        except (KeyError, TypeError, ValueError) as error:
            still.append(DeadLetter(record, f"not an outbox dead letter: {type(error).__name__}: {error}"))
        except Exception as error:
            still.append(DeadLetter(record, _why(error)))
    with engine.begin() as conn:
        deadletters.mark_redriven(conn, landed)
    return len(landed), still


# The running drain's advisory lock (two int4 keys: "hysy", "outb"): one polling drain at a time
LOCK = (0x68797379, 0x6F757462)
# What marks the only statements of the engine that pin an RDS Proxy connection, on purpose: a
# polling run's session lock. The run needs one connection all its minute anyway, and closes it at
# its end (tests/integration/test_pinning.py holds every other statement to pinning nothing).
PINS_ON_PURPOSE = "/* hybridsync: the polling drain's run lock pins its session on purpose */"
_WAITING = sa.text(
    "SELECT EXISTS (SELECT 1 FROM outbox) AS pending, EXISTS (SELECT 1 FROM pg_locks WHERE locktype = "
    "'advisory' AND classid = :a AND objid = :b AND objsubid = 2 AND NOT granted) AS successor"
)


def poll(engine: sa.Engine, client: Any, model: Model, tables: Mapping[str, str], *,
         seconds_left: Callable[[], float], every_s: float = 0.25,
         drained: Callable[[Drained], None] = lambda step: None,
         waiting: Callable[[Backlog], None] = lambda backlog: None,
         report_s: float = 1.0) -> Drained:  # fmt: skip
    """Drain, then look at the outbox every `every_s` and drain what it holds, until
    `seconds_left()` runs out or the next run waits for the lock; returns what was drained. One
    run at a time: a session-level advisory lock, which the next run waits for (up to its own
    time) and this run gives up as soon as it sees that run waiting. The lock is a cost choice,
    not a safety one: drains never share rows (`FOR UPDATE SKIP LOCKED`). Each drain step is
    reported to `drained` as it lands, and the outbox's backlog to `waiting` every `report_s`
    (the function's metrics). A change waits one poll at most, whatever the schedule's period:
    nothing wakes the drain but its own clock, as in AWS, where no NOTIFY reaches a Lambda
    function. Through RDS Proxy, the lock pins the session to one database connection (RDS guide,
    "Avoiding pinning"): the one connection the run holds anyway. A lost connection (a failover,
    a restart) is made again while time is left; any other failure fails the run."""
    total = Drained()
    while True:
        try:
            _poll(engine, client, model, tables, total, seconds_left, every_s, drained, waiting, report_s)
            return total
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as error:
            if error.connection_invalidated is False and getattr(error.orig, "sqlstate", None) is not None:
                raise  # PostgreSQL answered (a refused statement, not a lost connection)
            if seconds_left() <= every_s + 1:
                raise
            log.warning("the outbox drain lost PostgreSQL (%s); connecting again", type(error.orig).__name__)
            time.sleep(1)


def _poll(engine: sa.Engine, client: Any, model: Model, tables: Mapping[str, str], total: Drained,
          seconds_left: Callable[[], float], every_s: float, drained: Callable[[Drained], None],
          waiting: Callable[[Backlog], None], report_s: float) -> None:  # fmt: skip
    lock = {"a": LOCK[0], "b": LOCK[1]}
    with engine.connect() as conn:
        wait_ms = max(int((seconds_left() - every_s) * 1000), 1)
        # the wait for the lock, for this transaction only (SET takes no bind parameters)
        conn.execute(sa.text(f"SET LOCAL lock_timeout = {wait_ms}"))
        try:
            conn.execute(sa.text(f"{PINS_ON_PURPOSE} SELECT pg_advisory_lock(:a, :b)"), lock)
        except sa.exc.OperationalError as error:
            if getattr(error.orig, "sqlstate", None) != "55P03":  # lock_not_available: the run
                raise  # before us kept it all our time (it goes on polling)
            conn.rollback()
            return
        conn.commit()  # the lock is the session's: it outlives the transaction
        try:
            pending, successor, reported = True, False, 0.0
            # one drain step (up to `limit` rows) at a time, then the time left and the next run
            # are looked at again: a backlog never keeps a run past its time or from handing over
            while not successor and seconds_left() > every_s:
                more = False
                if pending:
                    step = total.add(drain(conn, client, model, tables))
                    if step.claimed:
                        drained(step)
                    more = bool(step.claimed) and not step.deferred  # else empty, or refused for now
                if time.monotonic() - reported >= report_s:
                    depth, age = conn.execute(BACKLOG).one()
                    conn.commit()
                    waiting(Backlog(int(depth), float(age)))
                    reported = time.monotonic()
                if not more:
                    time.sleep(every_s)
                pending, successor = conn.execute(_WAITING, lock).one()
                conn.commit()
        finally:
            with contextlib.suppress(Exception):
                conn.rollback()
                conn.execute(sa.text(f"{PINS_ON_PURPOSE} SELECT pg_advisory_unlock(:a, :b)"), lock)
                conn.commit()
            # closed, not pooled: a session that took a lock stays pinned to its RDS Proxy connection
            # until the client drops it (RDS guide, "Avoiding pinning"), not until it is idle
            conn.invalidate()
