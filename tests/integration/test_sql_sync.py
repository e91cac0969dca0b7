"""SQL -> DynamoDB through the outbox, on embedded PostgreSQL and moto server."""

from __future__ import annotations

import json
import threading
import time
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync.model.convert import marshal, unmarshal
from hybridsync.streams import filters
from hybridsync.sync import outbox, reconcile, writeback
from shop.model import MODEL, PRODUCT_AVAILABILITY, PRODUCT_DETAILS
from tests.handlers import LambdaContext, load


@pytest.fixture
def product_id():
    return f"p-{uuid.uuid4().hex[:8]}"


INSERT = "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, :n, :n)"


def sql(engine, statement, **params):
    with engine.begin() as conn:
        conn.execute(sa.text(statement), params)


def view(dynamodb, stack, entity, product_id):
    got = dynamodb.get_item(
        TableName=stack.table_names["main"], Key=marshal(entity.key({"ProductId": product_id})),
        ConsistentRead=True,
    )  # fmt: skip
    return unmarshal(got["Item"]) if "Item" in got else None


def drain(stack, engine):
    return outbox.drain_all(engine, stack.client(), MODEL, stack.table_names)


def test_price_and_stock_updates_reach_dynamodb_in_order(stack, engine, dynamodb, product_id):
    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 10.00, 5)",
        p=product_id,
    )
    for price in ("11.00", "12.50", "9.99"):
        sql(engine, "UPDATE product_availability SET price = :x WHERE product_id = :p", x=price, p=product_id)
    sql(engine, "UPDATE product_availability SET stock = stock - 1 WHERE product_id = :p", p=product_id)
    drain(stack, engine)
    item = view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)
    assert (item["Price"], item["Stock"], item["Origin"]) == (Decimal("9.99"), 4, "sql")
    with engine.connect() as conn:
        version = conn.execute(
            sa.text("SELECT version FROM product_availability WHERE product_id = :p"), {"p": product_id}
        ).scalar_one()
    assert item["Version"] == version
    assert view(dynamodb, stack, PRODUCT_DETAILS, product_id) is None  # vertical partition: untouched


def test_delete_replaces_the_view_with_a_tombstone(stack, engine, dynamodb, product_id):
    sql(
        engine,
        "INSERT INTO products (product_id, name, category) VALUES (:p, 'Kettle', 'kitchen')",
        p=product_id,
    )
    drain(stack, engine)
    assert view(dynamodb, stack, PRODUCT_DETAILS, product_id)["Name"] == "Kettle"
    sql(engine, "DELETE FROM products WHERE product_id = :p", p=product_id)
    drain(stack, engine)
    item = view(dynamodb, stack, PRODUCT_DETAILS, product_id)
    assert item["Missing"] is True and "Name" not in item


class Killed(BaseException):
    """The drainer's process dies (no handler runs for it)."""


class CrashOnPut:
    def __init__(self, client, after):
        self._client, self.after, self.puts = client, after, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_item(self, **kwargs):
        self.puts += 1
        if self.puts > self.after:
            raise Killed("drainer died between claim and apply")
        return self._client.put_item(**kwargs)


def test_crash_between_claim_and_apply_loses_nothing(stack, engine, dynamodb):
    ids = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    for n, pid in enumerate(ids):
        sql(
            engine,
            "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, :x, 1)",
            p=pid,
            x=n,
        )
    with pytest.raises(Killed):
        outbox.drain(engine, CrashOnPut(stack.client(), after=2), MODEL, stack.table_names)
    with engine.connect() as conn:
        pending = conn.execute(sa.text("SELECT count(*) FROM outbox WHERE row_key->>'product_id' = ANY(:i)"),
                               {"i": ids}).scalar_one()  # fmt: skip
    assert pending == 5  # the claim rolled back with the crash
    drain(stack, engine)
    drain(stack, engine)  # a duplicate drain changes nothing
    assert [view(dynamodb, stack, PRODUCT_AVAILABILITY, p)["Price"] for p in ids] == [0, 1, 2, 3, 4]


def test_concurrent_drainers_share_the_work_and_end_exact(stack, engine, dynamodb):
    ids = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(20)]
    for pid in ids:
        sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1, 1)", p=pid)
        for stock in range(2, 5):
            sql(engine, "UPDATE product_availability SET stock = :s WHERE product_id = :p", s=stock, p=pid)
    results = []

    def drainer():
        results.append(outbox.drain_all(engine, stack.client(), MODEL, stack.table_names, limit=7))

    threads = [threading.Thread(target=drainer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.claimed for r in results) >= 80
    assert {view(dynamodb, stack, PRODUCT_AVAILABILITY, p)["Stock"] for p in ids} == {4}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM outbox")).scalar_one() == 0


def test_an_older_change_never_overwrites_a_newer_view(stack, engine, dynamodb, product_id):
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1, 1)", p=product_id)
    drain(stack, engine)
    newer = view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)
    stale = {"ProductId": product_id, "Price": Decimal("0.01"), "Stock": 0}
    assert not outbox.put_view(stack.client(), stack.table_names["main"], PRODUCT_AVAILABILITY, stale,
                                newer["Version"] - 1)  # fmt: skip
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Price"] == Decimal(1)


def test_no_echo_changes_from_sql_are_not_written_back(
    stack, engine, dynamodb, product_id, workload, stream, truth
):
    sql(engine, "INSERT INTO customers (customer_id, name, email) VALUES (:c, 'Ada', 'ada@example.com')",
        c=product_id)  # fmt: skip
    drain(stack, engine)
    records = stream.read()
    assert records and all(r["dynamodb"]["NewImage"]["Origin"]["S"] == "sql" for r in records)
    outcome = writeback.write_back(records, engine, MODEL, truth=truth)
    assert (outcome.skipped, outcome.applied) == (len(records), 0)
    # the event source mapping would not even deliver them, and it tells the origin apart: a change
    # of a written-back entity is delivered when made in DynamoDB, dropped when marked as from SQL
    assert not any(filters.admits(writeback.event_filters(MODEL), r) for r in records)
    workload.order(workload.id("o"))
    (own,) = stream.read()
    assert filters.admits(writeback.event_filters(MODEL), own)
    own["dynamodb"]["NewImage"]["Origin"] = {"S": "sql"}
    assert not filters.admits(writeback.event_filters(MODEL), own)


def test_handler_drains_everything_and_reports(handler_env, stack, engine, dynamodb, product_id):
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 3, 3)", p=product_id)
    result = load("sql_sync").handler({}, LambdaContext())
    assert result["claimed"] >= 1
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 3


def polling(stack, engine, stopped: threading.Event, runs: list[outbox.Drained], seconds: float = 60):
    """A polling drain (freshness=realtime's scheduled run) in a thread, until `stopped` or `seconds`."""
    deadline = time.monotonic() + seconds
    left = lambda: 0 if stopped.is_set() else deadline - time.monotonic()  # noqa: E731
    thread = threading.Thread(
        target=lambda: runs.append(outbox.poll(engine, stack.client(), MODEL, stack.table_names,
                                               seconds_left=left, every_s=0.1)),
        daemon=True,
    )  # fmt: skip
    thread.start()
    return thread


def test_a_running_drain_applies_each_commit_while_it_polls(stack, engine, dynamodb, product_id):
    """Nothing wakes the drain but its own clock (no NOTIFY reaches a Lambda function): a commit
    made while a run polls is in DynamoDB before that run ends, however long it has left."""
    stopped, runs = threading.Event(), []
    run = polling(stack, engine, stopped, runs)
    try:
        time.sleep(0.5)  # the run took the lock and drained what waited
        sql(engine, INSERT, p=product_id, n=7)
        deadline = time.monotonic() + 20
        while view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 7
        assert run.is_alive()  # the run that polls applied it, not one that started after the commit
    finally:
        stopped.set()
        run.join(timeout=10)
    assert not run.is_alive() and runs[0].applied >= 1 and runs[0].freshness_s > 0


def test_the_next_run_takes_over_from_the_running_drain(stack, engine, dynamodb, product_id):
    """One polling run at a time: the next one waits for the lock, the running one sees it waiting
    and hands over at once (not at the end of its time), and the next one drains from then on."""
    first_stop, second_stop, runs = threading.Event(), threading.Event(), []
    first = polling(stack, engine, first_stop, runs)
    try:
        time.sleep(0.5)
        second = polling(stack, engine, second_stop, runs)
        first.join(timeout=20)
        assert not first.is_alive() and second.is_alive()  # handed over, with most of its minute left
        sql(engine, INSERT, p=product_id, n=9)
        deadline = time.monotonic() + 20
        while view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 9
    finally:
        first_stop.set()
        second_stop.set()
        first.join(timeout=10)
        second.join(timeout=10)
    assert len(runs) == 2 and runs[1].applied >= 1


def test_a_running_drain_that_loses_its_connection_connects_again(stack, engine, dynamodb, product_id):
    """A failover or a restart cuts the running drain's session (its lock goes with it): the run
    connects again, takes the lock again and drains what came meanwhile, within the same run."""
    stopped, runs = threading.Event(), []
    run = polling(stack, engine, stopped, runs)
    try:
        time.sleep(0.5)
        cut = "SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
        sql(engine, cut)
        sql(engine, INSERT, p=product_id, n=8)
        deadline = time.monotonic() + 20
        while view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 8
        assert run.is_alive()
    finally:
        stopped.set()
        run.join(timeout=10)
    assert runs and runs[0].applied >= 1


def test_a_backlog_never_keeps_a_run_past_its_time(stack, engine, dynamodb, product_id):
    """A run drains a backlog one step (500 rows) at a time and looks at its time between steps:
    it stops when its time is up, leaving the rest to the next run, never past its timeout."""
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) "
                "SELECT :p || '-' || n, 1, n FROM generate_series(1, 600) n", p=product_id)  # fmt: skip
    ends = iter([5.0, 5.0, 0.0])  # its lock, one drain step, then its time is up
    run = outbox.poll(engine, stack.client(), MODEL, stack.table_names, seconds_left=lambda: next(ends, 0.0))
    left = outbox.backlog(engine).depth
    assert run.claimed == 500 and left >= 100  # the next run's
    assert outbox.drain_all(engine, stack.client(), MODEL, stack.table_names).claimed == left


def test_the_scheduled_handler_polls_and_an_invoke_drains_once(handler_env, stack, engine, dynamodb,
                                                               product_id, monkeypatch):  # fmt: skip
    monkeypatch.setenv("OUTBOX_POLL_MS", "100")
    drain = load("sql_sync")
    sql(engine, INSERT, p=product_id, n=4)
    started = time.monotonic()
    assert drain.handler({}, LambdaContext(deadline=time.time() + 60))["claimed"] >= 1
    assert time.monotonic() - started < 30  # an invoke drains once, it does not poll for its minute
    scheduled = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
    result = drain.handler(scheduled, LambdaContext(deadline=time.time() + 17))  # 2 s to poll, then SAFETY_MS
    assert result["depth"] == 0
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 4


def test_reconcile_views_finds_stale_and_extra_views(stack, engine, dynamodb, product_id):
    """The SQL -> DynamoDB direction of reconcile: a change not drained yet leaves a stale view, a
    deleted row's live view is extra, and once drained both are gone."""
    table = stack.table_names["main"]

    def drifted():
        report = reconcile.reconcile_views(dynamodb, table, engine, MODEL)[PRODUCT_AVAILABILITY.name]
        return {kind for kind in ("missing", "stale", "extra")
                if any(product_id in map(str, key) for key in getattr(report, kind))}  # fmt: skip

    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 10.00, 5)",
        p=product_id,
    )
    assert drifted() == set()  # no view yet: a cold cache is no drift
    drain(stack, engine)
    assert drifted() == set()
    sql(engine, "UPDATE product_availability SET price = 11.00 WHERE product_id = :p", p=product_id)
    assert drifted() == {"stale"}
    drain(stack, engine)
    sql(engine, "DELETE FROM product_availability WHERE product_id = :p", p=product_id)
    assert drifted() == {"extra"}
    drain(stack, engine)
    assert drifted() == set()


# --- rows no write can apply: dead letters, never a blocked outbox --------------------------


def pending_rows(engine, ids):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM outbox WHERE row_key->>'product_id' = ANY(:i)"),
                            {"i": ids}).scalar_one()  # fmt: skip


def letters_of(engine, ids):
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT record::text AS record, reason FROM dead_letters WHERE source = 'sql_sync' "
                    "AND record->'row_key'->>'product_id' = ANY(:i) ORDER BY id"), {"i": ids},
        ).all()  # fmt: skip
    return [(json.loads(r.record, parse_float=Decimal), r.reason) for r in rows]


def test_poison_rows_are_dead_lettered_and_every_row_around_them_lands(stack, engine, dynamodb):
    """A view over DynamoDB's 400 KB and a price past its 38 digits, among good rows before and
    after them and more good rows than one drain claims: both poisons are dead letters with their
    reason and out of the outbox; every good row's view is there; nothing is left behind."""
    before = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    huge, overflow = f"p-{uuid.uuid4().hex[:8]}", f"p-{uuid.uuid4().hex[:8]}"
    after = [f"p-{uuid.uuid4().hex[:8]}" for _ in range(40)]
    for pid in before:
        sql(engine, "INSERT INTO products (product_id, name, category) VALUES (:p, 'Good', 'kitchen')", p=pid)
    sql(engine, "INSERT INTO products (product_id, name, category, description) VALUES (:p, 'Huge', 'k', :d)",
        p=huge, d="x" * 450_000)  # fmt: skip
    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1e130, 1)",
        p=overflow,
    )
    for pid in after:
        sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 2.50, 3)", p=pid)
    drained = outbox.drain_all(engine, stack.client(), MODEL, stack.table_names, limit=10)
    everything = [*before, huge, overflow, *after]
    assert pending_rows(engine, everything) == 0
    assert drained.dead_lettered == 2 and drained.deferred == 0
    assert all(view(dynamodb, stack, PRODUCT_DETAILS, p)["Name"] == "Good" for p in before)
    assert all(view(dynamodb, stack, PRODUCT_AVAILABILITY, p)["Price"] == Decimal("2.5") for p in after)
    assert view(dynamodb, stack, PRODUCT_DETAILS, huge) is None
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, overflow) is None
    letters = {
        letter["row_key"]["product_id"]: (letter, reason)
        for letter, reason in letters_of(engine, [huge, overflow])
    }
    (huge_letter, huge_reason), (overflow_letter, overflow_reason) = letters[huge], letters[overflow]
    assert "over DynamoDB's 409600" in huge_reason
    assert overflow_reason.startswith("Price has a magnitude over DynamoDB's")
    assert len(huge_letter["payload"]["description"]) == 450_000  # the row, as it was, to redrive
    assert overflow_letter["payload"]["price"] == Decimal("1E+130")
    assert (overflow_letter["operation"], overflow_letter["table_name"]) == ("INSERT", "product_availability")


def test_a_poisoned_change_leaves_the_view_at_the_keys_last_good_change(stack, engine, dynamodb, product_id):
    """In order per key, as a row-by-row pass would: the good change before the poison lands, the
    poison is a dead letter, and the change after it lands over both."""
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1, 1)", p=product_id)
    sql(engine, "UPDATE product_availability SET price = 2 WHERE product_id = :p", p=product_id)
    sql(engine, "UPDATE product_availability SET price = 1e130 WHERE product_id = :p", p=product_id)
    drain(stack, engine)
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Price"] == 2
    sql(engine, "UPDATE product_availability SET price = 3 WHERE product_id = :p", p=product_id)
    drain(stack, engine)
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Price"] == 3
    assert [reason.split(" ")[0] for _, reason in letters_of(engine, [product_id])] == ["Price"]


def test_a_dead_letter_redriven_after_the_fix_lands_or_is_superseded(stack, engine, dynamodb, product_id):
    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1e130, 1)",
        p=product_id,
    )
    drain(stack, engine)
    ((letter, _),) = letters_of(engine, [product_id])
    with engine.connect() as conn:
        (letter_id,) = conn.execute(sa.text("SELECT id FROM dead_letters WHERE event_id = :e"),
                                    {"e": f"outbox:{letter['outbox_id']}"}).scalars()  # fmt: skip
    landed, still = outbox.redrive(engine, stack.client(), MODEL, stack.table_names, [letter_id])
    assert (landed, [s.reason.split(" ")[0] for s in still]) == (0, ["Price"])  # not fixed: still pending
    sql(engine, "UPDATE product_availability SET price = 5 WHERE product_id = :p", p=product_id)  # the fix
    drain(stack, engine)
    landed, still = outbox.redrive(engine, stack.client(), MODEL, stack.table_names, [letter_id])
    assert (landed, still) == (1, [])  # an older version: superseded by the fix, and so resolved
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Price"] == 5


class Refusing:
    """A DynamoDB client that refuses puts of some products with an error code, after the SDK's retries."""

    def __init__(self, client, code, products):
        self._client, self.code, self.products = client, code, set(products)

    def __getattr__(self, name):
        return getattr(self._client, name)

    def put_item(self, **request):
        if request["Item"]["ProductId"]["S"] in self.products:
            from botocore.exceptions import ClientError

            status = 500 if self.code == "InternalServerError" else 400
            raise ClientError({"Error": {"Code": self.code, "Message": "refused"},
                               "ResponseMetadata": {"HTTPStatusCode": status}}, "PutItem")  # fmt: skip
        return self._client.put_item(**request)


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "InternalServerError"])
def test_a_write_refused_for_now_waits_in_the_outbox_and_is_never_dead_lettered(
    stack, engine, dynamodb, code
):
    throttled, fine = f"p-{uuid.uuid4().hex[:8]}", f"p-{uuid.uuid4().hex[:8]}"
    for pid in (throttled, fine):
        sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 4, 4)", p=pid)
    drained = outbox.drain_all(engine, Refusing(stack.client(), code, [throttled]), MODEL, stack.table_names)
    assert drained.deferred >= 1 and drained.dead_lettered == 0
    assert (pending_rows(engine, [throttled]), pending_rows(engine, [fine])) == (1, 0)
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, fine)["Stock"] == 4
    drain(stack, engine)  # DynamoDB takes it again
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, throttled)["Stock"] == 4
    assert letters_of(engine, [throttled, fine]) == []


def test_a_misconfigured_drain_fails_whole_and_keeps_every_row(stack, engine, product_id):
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 4, 4)", p=product_id)
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="AccessDenied"):
        outbox.drain_all(engine, Refusing(stack.client(), "AccessDeniedException", [product_id]), MODEL,
                         stack.table_names)  # fmt: skip
    assert pending_rows(engine, [product_id]) == 1 and letters_of(engine, [product_id]) == []
    drain(stack, engine)


def emitted_metrics(out, name):
    """Each flush of Powertools' metrics (CloudWatch's embedded format) that holds `name`, as
    name -> value."""
    flushes = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    return [{k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in f.items()}
            for f in flushes if name in f]  # fmt: skip


def test_the_drain_emits_its_figures_when_it_fails(handler_env, engine, monkeypatch, capsys, product_id):
    """Its table is gone (a misconfiguration): the drain raises, and the depth and age of the outbox
    are emitted all the same, so the OutboxAge alarm sees them."""
    sql(engine, "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 4, 4)", p=product_id)
    monkeypatch.setenv("TABLE_MAIN", "no-such-table")
    sql_sync = load("sql_sync")
    capsys.readouterr()
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="ResourceNotFound"):
        sql_sync.handler({}, LambdaContext())
    (figures,) = emitted_metrics(capsys.readouterr().out, "OutboxAge")
    assert figures["OutboxDepth"] >= 1 and figures["OutboxAge"] >= 0 and figures["OutboxApplied"] == 0
    monkeypatch.undo()


def test_the_drain_reports_its_dead_letters(handler_env, engine, capsys, product_id):
    sql(
        engine,
        "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 1e130, 4)",
        p=product_id,
    )
    result = load("sql_sync").handler({}, LambdaContext())
    assert result["dead_lettered"] >= 1 and result["depth"] == 0
    (figures,) = emitted_metrics(capsys.readouterr().out, "OutboxAge")
    assert figures["DeadLetters"] >= 1 and figures["OutboxDepth"] == 0


def test_a_polling_run_that_cannot_drain_fails_whole_and_the_next_run_drains(stack, engine, dynamodb,
                                                                              product_id):  # fmt: skip
    """An error no row is to blame for (here: its table is missing) fails the run, as a function
    error (Lambda retries it, then its dead-letter queue: the ScheduledFailures alarm); the row
    stays in the outbox, the run's lock is let go, and the next run drains it once the cause is gone."""
    tables = dict(stack.table_names) | {"main": "no-such-table"}
    sql(engine, INSERT, p=product_id, n=6)
    with pytest.raises(Exception, match="ResourceNotFound"):
        outbox.poll(engine, stack.client(), MODEL, tables, seconds_left=lambda: 30, every_s=0.1)
    assert view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id) is None
    ends = iter([5.0, 5.0, 0.0])  # the next run: its lock, one drain step, then its time is up
    run = outbox.poll(engine, stack.client(), MODEL, stack.table_names, seconds_left=lambda: next(ends, 0.0))
    assert run.applied >= 1 and view(dynamodb, stack, PRODUCT_AVAILABILITY, product_id)["Stock"] == 6
