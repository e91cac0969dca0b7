"""`hybridsync up` as a user runs it, on live data: rows of PostgreSQL no write can apply go to the
dead letters and every good row around them reaches DynamoDB; `dead-letters list` and `status`
show what happened."""

from __future__ import annotations

import time
import uuid

import boto3
import pytest
import sqlalchemy as sa

from hybridsync.runtime import db
from tests.integration.conftest import started_up


@pytest.fixture(scope="module")
def up(cloud_assembly, tmp_path_factory):
    """`hybridsync up` with services of its own (DynamoDB Local, PostgreSQL), in a process."""
    app = started_up(cloud_assembly, tmp_path_factory.mktemp("up"), "live")
    yield app
    app.stop()


def test_poison_outbox_rows_are_dead_lettered_and_every_good_row_reaches_dynamodb(up):
    names = up.environment()
    tag = uuid.uuid4().hex[:6]
    good = [f"{tag}-g{n}" for n in range(6)]
    availability = "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, :price, 1)"
    engine = db.create_engine(names["DATABASE_URL"])
    with engine.begin() as conn:  # good rows before and after both kinds of poison
        for pid in good[:3]:
            conn.execute(sa.text(availability), {"p": pid, "price": 1})
        huge = "INSERT INTO products (product_id, name, category, description) VALUES (:p, 'Huge', 'k', :d)"
        conn.execute(sa.text(huge), {"p": f"{tag}-huge", "d": "x" * 450_000})  # a view over 400 KB
        conn.execute(sa.text(availability), {"p": f"{tag}-overflow", "price": "1e130"})  # past 38 digits
        for pid in good[3:]:
            conn.execute(sa.text(availability), {"p": pid, "price": 1})
    engine.dispose()
    client = boto3.client("dynamodb", endpoint_url=names["DYNAMODB_ENDPOINT"], region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip

    def views() -> set[str]:
        keys = {pid: {"PK": {"S": f"PRODUCT#{pid}"}, "SK": {"S": "AVAILABILITY"}} for pid in good}
        table = names["TABLE_MAIN"]
        return {pid for pid, key in keys.items()
                if "Item" in client.get_item(TableName=table, Key=key, ConsistentRead=True)}  # fmt: skip

    deadline = time.monotonic() + 60
    while views() != set(good) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert views() == set(good)
    listed = up.cli("dead-letters", "list", "--source", "sql_sync")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "over DynamoDB's 409600" in listed.stdout
    assert "Price has a magnitude over DynamoDB's" in listed.stdout
    deadline = time.monotonic() + 10
    while ((up.status() or {}).get("outbox") or {}).get(
        "dead_lettered", 0
    ) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    outbox = up.status()["outbox"]
    assert outbox["dead_lettered"] >= 2 and outbox["depth"] == 0 and outbox["errors"] == 0, outbox
    status = up.cli("status", "--state-dir", str(up.state))
    assert "dead-lettered" in status.stdout, status.stdout


def test_the_banner_names_the_live_console_and_it_answers_there(up):
    """A line naming `console` and its URL on 127.0.0.1, and the page there (the scripts it loads,
    pinned npm packages fetched once into the cache, served by the console itself)."""
    import re
    import urllib.request

    (line,) = [line for line in up.log_tail(20_000).splitlines() if line.split()[:1] == ["console"]]
    url = re.fullmatch(r"\s*console\s+(http://127\.0\.0\.1:\d+/)\s.*", line)[1]
    with urllib.request.urlopen(url, timeout=30) as page:
        assert "hybridsync console" in page.read().decode()
    with urllib.request.urlopen(url + "static/sse.min.js", timeout=30) as script:
        assert script.status == 200 and b"sse" in script.read()
