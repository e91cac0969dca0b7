"""Nothing the deployed functions send PostgreSQL pins an RDS Proxy connection (Aurora user guide,
"Avoiding pinning an RDS Proxy"): no temporary table, session `SET`, `PREPARE` or server-side
prepared statement, advisory lock, `LISTEN`, or holdable cursor. Every statement of a write-back
batch, an outbox drain and a cache-aside read is recorded on the engine the functions build
(`hybridsync.runtime.clients`), then checked; the session is asked what it holds. One exception, on
purpose and marked: a polling drain's run lock, whose session the run closes at its end."""

from __future__ import annotations

import re
import uuid

import sqlalchemy as sa

from hybridsync.reads import cache
from hybridsync.runtime import db
from hybridsync.sync import outbox, writeback
from shop.model import CUSTOMER, MODEL
from tests.events import names, record

PINNING = re.compile(
    r"\A\s*SET\b(?!\s+LOCAL\b)|\b(CREATE\s+(TEMP|TEMPORARY)\b|PREPARE\b|DEALLOCATE\b|"
    r"pg_advisory_lock|pg_try_advisory_lock|LISTEN\b|DECLARE\b.*\bWITH\s+HOLD|DISCARD\b)",
    re.IGNORECASE | re.DOTALL,
)
PINS = ("CREATE TEMP TABLE x (a int)", "SET search_path = app", "set work_mem to '64MB'",
        "PREPARE q AS SELECT 1", "SELECT pg_advisory_lock(1)", "LISTEN outbox",
        "DECLARE c CURSOR WITH HOLD FOR SELECT 1")  # fmt: skip
HARMLESS = ("SET LOCAL lock_timeout = '1s'", "INSERT INTO t SELECT 1 ON CONFLICT (a) DO UPDATE SET b = 1")


def test_what_the_functions_send_postgresql_never_pins_a_proxy_connection(stack, engine, truth):
    functions = db.create_engine(stack.database_url, pool_size=1, max_overflow=0)  # as runtime.engine()
    sent: list[str] = []
    sa.event.listen(functions, "before_cursor_execute", lambda *args: sent.append(args[2]))
    records = [record(n) for n in names() if not n.startswith("poison")] * 4  # past psycopg's 5 executions
    for _ in range(3):
        writeback.write_back(records, functions, MODEL, truth=truth)
    customer = f"c-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO customers (customer_id, email, name) VALUES (:c, :e, 'Pin')"),
                     {"c": customer, "e": f"{customer}@example.com"})  # fmt: skip
    outbox.drain_all(functions, stack.client(), MODEL, stack.table_names)
    for _ in range(6):
        cache.get(stack.client(), stack.table_names["main"], functions, CUSTOMER, {"CustomerId": customer})
    assert len(sent) > 20
    pinning = [s for s in sent if PINNING.search(s)]
    assert pinning == [], pinning
    with functions.connect() as conn:  # the one pooled connection every statement above used
        prepared = conn.execute(sa.text("SELECT count(*) FROM pg_prepared_statements")).scalar_one()
        temporary = conn.execute(sa.text("SELECT count(*) FROM pg_class WHERE relpersistence = 't'"))
        temporary = temporary.scalar_one()
        listening = conn.execute(sa.text("SELECT count(*) FROM pg_listening_channels()")).scalar_one()
    assert (prepared, temporary, listening) == (0, 0, 0)
    functions.dispose()


def test_the_pinning_check_catches_what_pins():
    assert all(PINNING.search(s) for s in PINS)
    assert not any(PINNING.search(s) for s in HARMLESS)


def test_a_polling_drain_pins_only_its_marked_run_lock_and_closes_that_session(stack, engine):
    """freshness=realtime's drain run holds one session all its minute (it polls every 250 ms: a
    proxy could not share it anyway) and locks it so one run polls at a time: that lock pins,
    marked, and nothing else; at its end the session is closed, so no pinned proxy connection
    outlives the run."""
    functions = db.create_engine(stack.database_url, pool_size=1, max_overflow=0)  # as runtime.engine()
    sent: list[str] = []
    sa.event.listen(functions, "before_cursor_execute", lambda *args: sent.append(args[2]))
    closed: list[object] = []
    sa.event.listen(functions.pool, "invalidate", lambda *args: closed.append(args[0]))
    ends = iter([5.0, 5.0, 5.0, 0.0])
    outbox.poll(functions, stack.client(), MODEL, stack.table_names, seconds_left=lambda: next(ends, 0.0),
                every_s=0.05)  # fmt: skip
    pinning = [s for s in sent if PINNING.search(s)]
    assert len(pinning) == 1 and outbox.PINS_ON_PURPOSE in pinning[0], pinning  # the lock (unlocking: no)
    with engine.connect() as conn:
        held = conn.execute(sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")).scalar_one()
    assert held == 0 and len(closed) == 1  # its session closed, not pooled
    functions.dispose()
