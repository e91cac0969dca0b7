"""Issue 42, any writer: orders and order lines written into the running app's table the way an
existing service writes them, knowing nothing of hybridsync, by two SDKs at once: the AWS SDK for
JavaScript v3 (tests/writers/plain_writes.mjs, run with node) and plain boto3. Bare PutItem with
neither an entity tag nor a version, a tagged put without a version, a DynamoDBMapper-style
counter Version 1, 2, 3 then a delete and the item made again at Version 1, `SET n = n + :d`, a
status change, DeleteItem, BatchWriteItem and TransactWriteItems. Once the pipeline has drained,
every item is its row in PostgreSQL and every deleted item no live row, nothing is a dead letter,
the aggregates equal a recount of the items and `hybridsync reconcile` finds no drift."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
import sqlalchemy as sa
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from hybridsync.dynamodb.scans import Scanner
from hybridsync.model.declare import FieldType
from hybridsync.runtime import db
from hybridsync.sync.aggregate import Aggregation
from shop.model import CANCELLED, MODEL
from tests.integration.conftest import started_up

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "writers" / "plain_writes.mjs"
CREATED = "2026-11-22T07:00:00.000Z"
DRAIN_S = 40  # the mappings run without a batching window: a drain takes a few seconds
ORDER, LINE = MODEL.entity("Order"), MODEL.entity("OrderLine")
Key = tuple[str, str]  # (PK, SK)


# --- the writers ------------------------------------------------------------------------------


def javascript_writer(endpoint: str, table: str, prefix: str) -> subprocess.Popen:
    """plain_writes.mjs in a node of its own, with the SDK from the repository's node_modules."""
    if shutil.which("node") is None or not (ROOT / "node_modules" / "@aws-sdk" / "client-dynamodb").is_dir():
        pytest.fail("node and @aws-sdk/client-dynamodb (package.json: npm ci) are needed")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "DYNAMODB_ENDPOINT": endpoint, "TABLE": table, "PREFIX": prefix, "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
           "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    return subprocess.Popen(["node", str(SCRIPT)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def javascript_expected(writer: subprocess.Popen) -> dict[Key, dict[str, Any] | None]:
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, f"plain_writes.mjs failed:\n{out[-2000:]}\n{err[-3000:]}"
    plain = TypeDeserializer().deserialize
    expected = {}
    for entry in json.loads(out.strip().splitlines()[-1])["items"]:
        key = (entry["key"]["PK"]["S"], entry["key"]["SK"]["S"])
        item = entry["item"]
        expected[key] = None if item is None else {k: plain(v) for k, v in item.items()}
    return expected


class Boto3Writer:
    """The same kinds of writes by a Python service with boto3's resource API (its batch writer
    for BatchWriteItem) and the low-level client (for TransactWriteItems), on keys of its own."""

    def __init__(self, endpoint: str, table: str, prefix: str):
        options = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "local",
                   "aws_secret_access_key": "local"}  # fmt: skip
        self.table = boto3.resource("dynamodb", **options).Table(table)
        self.client = boto3.client("dynamodb", **options)
        self.customer = f"{prefix}-c1"
        self.prefix = prefix
        self.expected: dict[Key, dict[str, Any] | None] = {}

    def order_key(self, order_id: str) -> dict[str, str]:
        return {"PK": f"CUSTOMER#{self.customer}", "SK": f"ORDER#{CREATED}#{order_id}"}

    def line_key(self, order_id: str, line_no: int) -> dict[str, str]:
        return {"PK": f"CUSTOMER#{self.customer}", "SK": f"ORDER#{CREATED}#{order_id}#LINE#{line_no:04d}"}

    def order(self, order_id: str, total: str, **extra: Any) -> dict[str, Any]:
        return {**self.order_key(order_id), "OrderId": order_id, "CustomerId": self.customer,
                "CreatedAt": CREATED, "Status": "OPEN", "Total": Decimal(total), **extra}  # fmt: skip

    def line(
        self, order_id: str, line_no: int, product: int, quantity: int, price: str, **extra: Any
    ) -> dict:
        return {**self.line_key(order_id, line_no), "OrderId": order_id, "CustomerId": self.customer,
                "CreatedAt": CREATED, "Status": "OPEN", "LineNo": line_no,
                "ProductId": f"{self.prefix}-p{product}", "Quantity": quantity, "UnitPrice": Decimal(price),
                **extra}  # fmt: skip

    def expect(self, key: dict[str, str], item: dict[str, Any] | None) -> None:
        self.expected[(key["PK"], key["SK"])] = item

    def put(self, item: dict[str, Any]) -> None:
        self.table.put_item(Item=item)
        self.expect(item, item)

    def mapper_save(self, item: dict[str, Any], version: int, previous: int | None = None) -> None:
        """As DynamoDBMapper saves an object: an UpdateItem of every attribute with the counter,
        on the condition that the counter is what was read (or absent, for a new object)."""
        key = {"PK": item["PK"], "SK": item["SK"]}
        attributes = {k: v for k, v in item.items() if k not in key} | {"Version": version}
        names = {f"#a{n}": name for n, name in enumerate(attributes)}
        values = {f":a{n}": value for n, value in enumerate(attributes.values())}
        condition = "attribute_not_exists(#v)" if previous is None else "#v = :previous"
        if previous is not None:
            values[":previous"] = previous
        self.table.update_item(
            Key=key, UpdateExpression="SET " + ", ".join(f"#a{n} = :a{n}" for n in range(len(attributes))),
            ConditionExpression=condition, ExpressionAttributeNames=names | {"#v": "Version"},
            ExpressionAttributeValues=values,
        )  # fmt: skip
        self.expect(key, item | {"Version": version})

    def mapper_delete(self, key: dict[str, str], version: int) -> None:
        self.table.delete_item(Key=key, ConditionExpression="#v = :v",
                               ExpressionAttributeNames={"#v": "Version"},
                               ExpressionAttributeValues={":v": version})  # fmt: skip
        self.expect(key, None)

    def update(self, key: dict[str, str], expression: str, names: dict, values: dict) -> None:
        new = self.table.update_item(Key=key, UpdateExpression=expression, ExpressionAttributeNames=names,
                                     ExpressionAttributeValues=values, ReturnValues="ALL_NEW")  # fmt: skip
        self.expect(key, new["Attributes"])

    def run(self) -> dict[Key, dict[str, Any] | None]:
        p = self.prefix
        # 1. bare PutItem: no Entity, no Version
        o1 = f"{p}-o1"
        for item in (self.order(o1, "40.00"), self.line(o1, 1, 1, 1, "700"), self.line(o1, 2, 2, 2, "1000"),
                     self.line(o1, 3, 2, 5, "1.5")):  # fmt: skip
            self.put(item)
        # 2. tagged, without a Version
        o2 = f"{p}-o2"
        self.put(self.order(o2, "12.00", Entity="Order"))
        self.put(self.line(o2, 1, 1, 3, "400", Entity="OrderLine"))
        # 3. the mapper's counter: 1, 2, 3, deleted, made again at 1
        o3 = f"{p}-o3"
        for version, (total, quantity) in enumerate((("5.00", 1), ("10.00", 2), ("15.00", 3)), start=1):
            previous = version - 1 or None
            self.mapper_save(self.order(o3, total), version, previous)
            self.mapper_save(self.line(o3, 1, 2, quantity, "500"), version, previous)
        self.mapper_delete(self.order_key(o3), 3)
        self.mapper_delete(self.line_key(o3, 1), 3)
        self.mapper_save(self.order(o3, "2.50"), 1)
        self.mapper_save(self.line(o3, 1, 1, 5, "2.5"), 1)  # 12.5: half a loyalty point dropped
        # 4. arithmetic on untagged items
        self.update(self.line_key(o1, 1), "SET #q = #q + :d", {"#q": "Quantity"}, {":d": 2})
        self.update(self.order_key(o1), "SET #t = #t + :d", {"#t": "Total"}, {":d": Decimal("14.00")})
        # 5. a status change
        for key in (self.order_key(o2), self.line_key(o2, 1)):
            self.update(key, "SET #s = :s", {"#s": "Status"}, {":s": CANCELLED})
        # 6. DeleteItem
        self.table.delete_item(Key=self.line_key(o1, 2))
        self.expect(self.line_key(o1, 2), None)
        # 7. BatchWriteItem (boto3's batch writer): puts and a delete
        o4 = f"{p}-o4"
        batch = [self.order(o4, "20.00"), self.line(o4, 1, 2, 1, "1000"), self.line(o4, 2, 1, 2, "500")]
        with self.table.batch_writer() as writer:
            for item in batch:
                writer.put_item(Item=item)
            writer.delete_item(Key=self.line_key(o1, 3))
        for item in batch:
            self.expect(item, item)
        self.expect(self.line_key(o1, 3), None)
        # 8. TransactWriteItems (low-level client)
        o5 = f"{p}-o5"
        placed = [self.order(o5, "9.00"), self.line(o5, 1, 2, 3, "300")]
        serialize = TypeSerializer().serialize
        low = lambda values: {k: serialize(v) for k, v in values.items()}  # noqa: E731
        self.client.transact_write_items(TransactItems=[
            *({"Put": {"TableName": self.table.name, "Item": low(i),
                       "ConditionExpression": "attribute_not_exists(PK)"}} for i in placed),
            {"Update": {"TableName": self.table.name, "Key": low(self.line_key(o4, 2)),
                        "UpdateExpression": "SET #q = #q + :one",
                        "ExpressionAttributeNames": {"#q": "Quantity"},
                        "ExpressionAttributeValues": {":one": {"N": "1"}}}},
            {"Delete": {"TableName": self.table.name, "Key": low(self.line_key(o4, 1))}},
            {"Update": {"TableName": self.table.name, "Key": low(self.order_key(o4)),
                        "UpdateExpression": "SET #t = #t - :t", "ExpressionAttributeNames": {"#t": "Total"},
                        "ExpressionAttributeValues": {":t": {"N": "10"}}}},
            {"ConditionCheck": {"TableName": self.table.name, "Key": low(self.order_key(o1)),
                                "ConditionExpression": "attribute_exists(PK)"}},
        ])  # fmt: skip
        for item in placed:
            self.expect(item, item)
        self.expect(self.line_key(o4, 2), self.line(o4, 2, 1, 3, "500"))
        self.expect(self.line_key(o4, 1), None)
        self.expect(self.order_key(o4), self.order(o4, "10.00"))
        return self.expected


# --- both sides -------------------------------------------------------------------------------


def entity_of(key: Key) -> Any:
    return LINE if "#LINE#" in key[1] else ORDER


def expected_column(field: Any, item: dict[str, Any]) -> Any:
    """The column value an item's attribute is, converted here (not by the engine's converter)."""
    value = item.get(field.attribute)
    if value is None:
        return None
    if field.type is FieldType.TIMESTAMP:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if field.type is FieldType.INTEGER:
        return int(value)
    if field.type is FieldType.DECIMAL:
        return Decimal(value)
    return value


def sql_rows(engine: sa.Engine, keys: list[Key]) -> dict[Key, dict | None]:
    """Each key's PostgreSQL row (None: no row), by the sql key its item has or had."""
    out: dict[Key, dict | None] = {}
    with engine.connect() as conn:
        for key in keys:
            entity = entity_of(key)
            order_id = key[1].split("#")[-3 if entity is LINE else -1]
            where = {"order_id": order_id} | (
                {"line_no": int(key[1].split("#")[-1])} if entity is LINE else {}
            )
            clause = " AND ".join(f"{c} = :{c}" for c in where)
            row = conn.execute(sa.text(f"SELECT * FROM {entity.sql_table} WHERE {clause}"), where).mappings()
            found = row.one_or_none()
            out[key] = dict(found) if found is not None else None
    return out


def mismatches(items: dict[Key, dict | None], rows: dict[Key, dict | None]) -> list[str]:
    """How PostgreSQL differs from DynamoDB: a live item without its live row with equal fields
    (and the writer's Version carried, or none), a deleted item with a live row."""
    out = []
    for key, item in items.items():
        row = rows.get(key)
        if item is None:
            if row is not None and not row["deleted"]:
                out.append(f"{key}: deleted in DynamoDB, live in PostgreSQL")
            continue
        if row is None or row["deleted"]:
            out.append(f"{key}: live in DynamoDB, {'no row' if row is None else 'a tombstone'} in PostgreSQL")
            continue
        entity = entity_of(key)
        for field in entity.fields:
            name, have = field.attribute, row[field.column]
            if have != expected_column(field, item):
                out.append(f"{key}: {name} {item.get(name)!r} in DynamoDB, {have!r} in SQL")
        version = item.get("Version")
        if row["version"] != (None if version is None else int(version)):
            out.append(f"{key}: Version {version!r} in DynamoDB, version {row['version']!r} in SQL")
        if row["stream_position"] is None:
            out.append(f"{key}: no stream position")
    return out


def clean_count(items: dict[Key, dict | None]) -> dict[tuple[str, str, str], tuple[Decimal, Decimal]]:
    """The shop's two aggregates counted here from the live lines: Sales (Units, Revenue) per
    product and day and per product and month, CustomerSpend (Points: whole units per line,
    Spend) per customer and month; cancelled lines count nothing."""
    out: dict[tuple[str, str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for key, item in items.items():
        if item is None or entity_of(key) is not LINE or item["Status"] == CANCELLED:
            continue
        quantity, amount = Decimal(item["Quantity"]), Decimal(item["Quantity"]) * Decimal(item["UnitPrice"])
        for period in (item["CreatedAt"][:10], item["CreatedAt"][:7]):  # its day and its month
            sales = out[("Sales", item["ProductId"], period)]
            sales[0] += quantity
            sales[1] += amount
        spend = out[("CustomerSpend", item["CustomerId"], item["CreatedAt"][:7])]
        spend[0] += int(amount)
        spend[1] += amount
    return {k: (v[0], v[1]) for k, v in out.items() if any(v)}


# --- the test ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def up(cloud_assembly, tmp_path_factory):
    """`hybridsync up` with services of its own, its mappings without a batching window."""
    app = started_up(cloud_assembly, tmp_path_factory.mktemp("any-writer"), "anywriter",
                     MaximumBatchingWindowInSeconds=0)  # fmt: skip
    yield app
    app.stop()


@pytest.fixture(scope="module")
def written(up):
    """Both writers at once, then the pipeline given until DRAIN_S to catch up: every key with
    DynamoDB's item (strongly consistent; None: deleted) and PostgreSQL's row, as last read."""
    names = up.environment()
    endpoint, table = names["DYNAMODB_ENDPOINT"], names["TABLE_MAIN"]
    assert urlparse(endpoint).hostname in ("127.0.0.1", "localhost"), endpoint
    tag = uuid.uuid4().hex[:8]
    started = time.monotonic()
    node = javascript_writer(endpoint, table, f"{tag}-js")  # both at once, on keys of their own
    try:
        expected = Boto3Writer(endpoint, table, f"{tag}-py").run()
    except BaseException:
        node.kill()
        node.communicate()
        raise
    expected |= javascript_expected(node)
    wrote_s = time.monotonic() - started
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")  # fmt: skip
    engine = db.create_engine(names["DATABASE_URL"])
    aggregation = Aggregation(MODEL)
    ours = lambda key: str(key[1]).startswith(tag)  # noqa: E731
    deadline = time.monotonic() + DRAIN_S
    while True:
        scanned = list(Scanner(client, table, consistent=True).items())
        by_key = {(i["PK"], i["SK"]): i for i in scanned}
        items = {key: by_key.get(key) for key in expected}
        rows = sql_rows(engine, list(expected))
        stored = aggregation.stored(scanned, ours)
        status = up.status() or {}
        lagging = {
            n: m.get("lag_records") for n, m in status.get("mappings", {}).items() if m.get("lag_records")
        }
        if (not mismatches(items, rows) and stored == clean_count(items) and not lagging) or (
            time.monotonic() > deadline
        ):
            break
        time.sleep(0.5)
    with engine.connect() as conn:
        letters = conn.execute(
            sa.text(
                "SELECT source, reason, record::text AS record FROM dead_letters WHERE record::text LIKE :t"
            ),
            {"t": f"%{tag}%"},
        ).all()
    engine.dispose()
    return {"tag": tag, "expected": expected, "items": items, "rows": rows, "scanned": scanned,
           "stored": stored, "letters": letters, "status": status, "wrote_s": wrote_s,
           "drained_s": time.monotonic() - started - wrote_s}  # fmt: skip


def test_the_writers_did_what_they_meant(written):
    """The writers' own account of what each key holds last is what DynamoDB holds (else what
    follows tests nothing): both SDKs, every kind of write, the re-created items at Version 1."""
    expected, items = written["expected"], written["items"]
    assert len(expected) == 26, sorted(expected)  # 13 keys each, 3 of them deleted last
    assert sum(v is None for v in expected.values()) == 6
    wrong = {}
    for key, want in expected.items():
        have = items[key]
        if (want is None) != (have is None) or (want and any(have.get(k) != v for k, v in want.items())):
            wrong[key] = (want, have)
    assert not wrong, wrong
    untagged = [k for k, v in items.items() if v and "Entity" not in v]
    unversioned = [k for k, v in items.items() if v and "Version" not in v]
    assert len(untagged) == len(unversioned) == 16, (untagged, unversioned)  # all but o2's and o3's
    recreated = [v for v in items.values() if v and v.get("Version") == 1]
    assert len(recreated) == 4, recreated  # each writer's order o3 and its line, made again at 1


def test_every_item_is_its_row_and_every_deleted_item_no_live_row(written):
    problems = mismatches(written["items"], written["rows"])
    recreated = [k for k, v in written["items"].items() if v and v.get("Version") == 1]
    for key in recreated:  # deleted at Version 3, made again at 1: the row is the new item
        row = written["rows"][key]
        assert row is not None and not row["deleted"] and row["version"] == 1, (key, row)
    assert not problems, "\n".join(problems) + f"\nstatus: {json.dumps(written['status'].get('mappings'))}"


def test_nothing_written_is_a_dead_letter_or_a_failed_batch(written):
    assert not written["letters"], [(s, r) for s, r, _ in written["letters"]]
    status = written["status"]
    assert status.get("failed_batches", 0) == 0, status
    for name, mapping in status.get("mappings", {}).items():
        assert mapping["sent_to_failure_queue"] == 0 and not mapping["blocked"], (name, mapping)


def test_the_aggregates_equal_a_recount(written):
    tag, scanned, stored = written["tag"], written["scanned"], written["stored"]
    clean = clean_count(written["items"])
    assert {k[0] for k in clean} == {"Sales", "CustomerSpend"} and len(clean) == 10, clean
    assert stored == clean, {k: (stored.get(k), clean.get(k)) for k in stored.keys() | clean.keys()
                             if stored.get(k) != clean.get(k)}  # fmt: skip
    assert Aggregation(MODEL).recount(scanned, lambda key: str(key[1]).startswith(tag)) == clean


def reconcile_table(out: str) -> dict[str, dict[str, int]]:
    """`hybridsync reconcile`'s table: entity -> checked, missing, stale, extra, unmappable."""
    columns = ("checked", "missing", "stale", "extra", "unmappable")
    found = re.findall(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$", out, re.MULTILINE)
    return {name: dict(zip(columns, map(int, counts), strict=True)) for name, *counts in found}


@pytest.fixture(scope="module")
def reconciled(up, written):
    done = up.cli("reconcile", "--consistent", timeout_s=60)
    return done, reconcile_table(done.stdout)


def test_reconcile_finds_no_drift(reconciled):
    done, table = reconciled
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    for entity in ("Order", "OrderLine"):
        assert table[entity]["missing"] == table[entity]["stale"] == table[entity]["extra"] == 0, done.stdout


def test_reconcile_compares_every_item_whoever_wrote_it(reconciled, written):
    """No item passes unchecked: the untagged and unversioned ones are compared too, not left out
    or named unmappable (else a drift of theirs would go unseen)."""
    done, table = reconciled
    live = defaultdict(int)
    for key, item in written["items"].items():
        live[entity_of(key).name] += item is not None
    for entity in ("Order", "OrderLine"):
        assert table[entity]["checked"] >= live[entity], (entity, live[entity], done.stdout)
        assert table[entity]["unmappable"] == 0, done.stdout
    assert written["tag"] not in done.stdout, done.stdout
