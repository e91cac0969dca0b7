"""The synthesized app running locally: everything derived from the template, end to end through the
real functions (their asset folders), the stream mappings, PostgreSQL and the HTTP API on a socket."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.local.app import LocalApp
from hybridsync.local.template import Assembly
from hybridsync.model.convert import marshal
from hybridsync.sync.reconcile import reconcile
from hybridsync.testing.fuzz import exchange
from shop.model import EVENT_SERIES, MODEL, ORDER, ORDER_LINE, PRODUCT_AVAILABILITY


def esm(assembly, function):
    (found,) = [m for m in assembly.resources("AWS::Lambda::EventSourceMapping")
                if f"\"{function}Live" in json.dumps(m.properties["FunctionName"])]  # fmt: skip
    return found


@pytest.fixture(scope="module")
def app(cloud_assembly, stack, tmp_path_factory):
    """The app of the session's `cdk synth`, with its batching windows shortened (a template edit,
    as `-c stream_batching_window_s=0` would make): the write-back also gets batches of 2."""
    assembly = Assembly.load(cloud_assembly)
    esm(assembly, "WriteBack").properties.update(MaximumBatchingWindowInSeconds=0, BatchSize=2)
    esm(assembly, "Aggregate").properties.update(MaximumBatchingWindowInSeconds=0)
    state, prefix = tmp_path_factory.mktemp("app"), f"app{uuid.uuid4().hex[:4]}"
    running = LocalApp(assembly, **stack.endpoints(), state_dir=state, prefix=prefix)
    running.start(http_port=0, schedules=False)
    yield running
    running.stop()


def wait_for(check, seconds=30, state=lambda: None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out; {state()}")


def test_everything_is_derived_from_the_template(app, cloud_assembly):
    template = Assembly.load(cloud_assembly)
    tables = list(template.resources("AWS::DynamoDB::GlobalTable"))
    assert sorted(app.tables) == sorted(t.construct for t in tables)
    for table in tables:
        described = app.client.describe_table(TableName=app.tables[table.construct])["Table"]
        assert described["KeySchema"] == table.properties["KeySchema"]
        declared = {i["IndexName"] for i in table.properties.get("GlobalSecondaryIndexes", [])}
        assert {i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])} == declared
    assert set(app.functions) == {
        "Migrate",
        "WriteBack",
        "Aggregate",
        "Api",
        "SqlSync",
        "Sweep",
        "Rotate",
        "Operations",
        "Users",
    }
    # run at start, as a deploy does: the logins first, then the schema as the migrator
    assert app.custom_resources == ["DatabaseUsers", "Schema", "TimeSeriesTables"]
    today = EVENT_SERIES.table_name(app.prefix, datetime.now(UTC))
    assert app.client.describe_table(TableName=today)["Table"]["TableStatus"] == "ACTIVE"
    write_back = app.functions["WriteBack"]
    assert (write_back.timeout_s, write_back.memory_mb) == (120, 1024)
    assert write_back.environment["TABLE_MAIN"] == app.tables["MainTable"]  # an import, resolved
    env = write_back.environment  # its login's secret on the local Secrets Manager, the server verified
    assert "DATABASE_URL" not in env and env["DB_ROLE"] == "writer" and env["DB_SSLMODE"] == "verify-full"
    assert app.logins.by_user["hybridsync_writer"] == env["DB_SECRET_ARN"] and "DB_USER" not in env
    settings = {p.settings.name.split(":")[0]: p.settings for p in app.pollers}
    assert settings["WriteBack"].batch_size == 2  # the edited template, not a second list
    assert settings["Aggregate"].tumbling_window_s == 60 and settings["Aggregate"].bisect
    assert [(r.key, r.pattern.pattern) for r in app.routes()] == [("ANY /{proxy+}", "/(?P<proxy>.+)")]
    assert app.http.server_address[0] == "127.0.0.1"  # the local HTTP API is loopback only
    assert len(app.queues) == 1  # the schedules' dead letters (the mappings store in the failure bucket)
    assert app.dead_letter_queues.keys() == {"Sweep", "Rotate", "SqlSync"}
    assert app.failure_environment()["FAILED_BATCHES_BUCKET"] in app.buckets.values()
    synthesized = list(app.assembly.resources("AWS::CloudWatch::Alarm"))
    assert len(app.alarms.alarms) == len(synthesized) > 50 and {a.state for a in app.alarms.alarms} <= {
        "OK",
        "INSUFFICIENT_DATA",
    }
    not_local = [a.name for a in app.alarms.alarms if not a.measured()]  # DynamoDB, RDS Proxy, Aurora
    assert not_local and all(a.state == "INSUFFICIENT_DATA" for a in app.alarms.alarms if not a.measured())


def test_an_order_flows_to_postgresql_the_aggregates_and_the_http_api(app, engine):
    client, table = app.client, app.tables["MainTable"]
    tag = uuid.uuid4().hex[:6]
    product = f"{tag}-kettle"
    orders = [f"{tag}-o{n}" for n in range(3)]
    for order_id in orders:
        values = {"OrderId": order_id, "CustomerId": f"{tag}-c", "CreatedAt": "2031-03-04T10:00:00.000Z",
                  "Status": "OPEN", "Version": 1}  # fmt: skip
        store.put(client, table, ORDER, values | {"Total": Decimal("30")})
        store.put(client, table, ORDER_LINE, values | {"LineNo": 1, "ProductId": product, "Quantity": 3,
                                                       "UnitPrice": Decimal("10")})  # fmt: skip

    def landed():
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM orders WHERE order_id LIKE :t"),
                                {"t": f"{tag}%"}).scalar_one() == 3  # fmt: skip

    wait_for(landed)
    url = f"http://127.0.0.1:{app.http.server_address[1]}"

    def top():
        with urllib.request.urlopen(f"{url}/products/top?day=2031-03-04&n=1") as response:
            body = json.loads(response.read())
        return body["products"] and body["products"][0]["Units"] == 9 and body

    assert wait_for(top)["products"][0]["ProductId"] == product
    write_back = next(p for p in app.pollers if p.settings.name.startswith("WriteBack"))
    assert write_back.stats.batches >= 3  # batches of 2: the template's batch size rules
    drift = reconcile(client, table, engine, MODEL)
    assert not [k for d in drift.values() for k in d.missing + d.stale + d.extra if str(k[0]).startswith(tag)]


def test_an_expired_item_goes_as_ttl_takes_it_and_is_never_written_back_as_a_delete(app, engine):
    """An order whose TTL passed and that lacks keys of some GSIs (DynamoDB Local never expires
    those): the app's sweep deletes it, its REMOVE carries the service's identity, and the
    write-back's filter drops it as AWS's would (its row stays live)."""
    client, table = app.client, app.tables["MainTable"]
    order_id = f"{uuid.uuid4().hex[:6]}-expiring"
    values = {"OrderId": order_id, "CustomerId": "c-ttl", "CreatedAt": "2031-03-04T10:00:00.000Z",
              "Status": "SHIPPED", "Version": 1, "Total": Decimal("5")}  # fmt: skip
    values["ExpiresAt"] = int(time.time()) - 60
    store.put(client, table, ORDER, values)

    def row():
        with engine.connect() as conn:
            return conn.execute(
                sa.text("SELECT deleted FROM orders WHERE order_id = :o"), {"o": order_id}
            ).first()

    wait_for(row)
    write_back = next(p for p in app.pollers if p.settings.name.startswith("WriteBack"))
    filtered = write_back.stats.filtered
    (sweeper,) = [s for s in app.sweepers if s.table == table]
    assert sweeper.sweep() >= 1 and store.get(client, table, ORDER.key(values)) is None
    wait_for(lambda: write_back.stats.filtered > filtered)  # its REMOVE, read and dropped
    assert row().deleted is False


def call(app, method, path, body=None, headers=None):
    """One HTTP request to the local API over its socket: (status, JSON body or None)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{app.http.server_address[1]}{urllib.parse.quote(path)}", method=method,
        data=None if body is None else json.dumps(body).encode(), headers=headers or {},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_write_path_over_the_socket_reaches_postgresql(app, engine):
    tag = uuid.uuid4().hex[:6]
    order = {"CustomerId": f"{tag}-c", "Lines": [{"ProductId": f"{tag}-p", "Quantity": 2, "UnitPrice": 4.5}]}
    assert call(app, "PUT", f"/customers/{tag}-c", {"Name": "C", "Email": "c@example.com"})[0] == 200
    product = {"Name": "P", "Category": "c", "Price": 4.5, "Stock": 1}
    assert call(app, "PUT", f"/products/{tag}-p", product)[0] == 200
    code, placed = call(app, "POST", "/orders", order, {"Idempotency-Key": tag})
    assert code == 201, placed
    assert code == 201 and call(app, "POST", "/orders", order, {"Idempotency-Key": tag}) == (200, placed)
    assert call(app, "PUT", f"/orders/{placed['OrderId']}/status", {"Status": "SHIPPED"})[0] == 200

    def written_back():
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT status, total FROM orders WHERE order_id = :o"),
                               {"o": placed["OrderId"]}).first()  # fmt: skip
        return row is not None and row.status == "SHIPPED" and row

    assert wait_for(written_back).total == Decimal("9.0")
    body = "Zürich " + os.urandom(1_200_000).hex()  # 2.4 MB that hardly compresses: kept in S3
    review = {"CustomerId": f"{tag}-c", "Rating": 4, "Title": "Sturdy", "Body": body}
    assert call(app, "PUT", f"/products/{tag}-p/reviews/r1", review)[1]["Storage"] == "s3"
    assert call(app, "GET", f"/products/{tag}-p/reviews/r1")[1]["Body"] == review["Body"]
    assert call(app, "PUT", f"/stores/CH/ZH/Zürich/{tag}", {"Name": "Bahnhof"})[0] == 200
    assert [s["StoreId"] for s in call(app, "GET", "/stores/CH/ZH/Zürich")[1]["stores"]] == [tag]
    scheduled = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
    assert app.function("sweep").invoke(scheduled) == {"chunks": 0, "objects": 0}  # nothing orphaned


def test_a_postgresql_change_reaches_dynamodb_through_the_drain_function(app, engine):
    product = f"p-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 5, 7)"),
                     {"p": product})  # fmt: skip
    assert app.function("sql_sync").invoke({})["claimed"] >= 1  # an invoke drains once
    key = marshal(PRODUCT_AVAILABILITY.key({"ProductId": product}))
    item = app.client.get_item(TableName=app.tables["MainTable"], Key=key)
    assert (item["Item"]["Stock"], item["Item"]["Origin"]) == ({"N": "7"}, {"S": "sql"})


def test_a_postgresql_change_reaches_dynamodb_by_no_path_the_deployed_app_lacks(app, engine):
    """In AWS only the drain function carries a PostgreSQL change to DynamoDB, and only while a
    run of it is going (no NOTIFY reaches Lambda). Here no schedule runs and nothing is invoked: the
    change stays in PostgreSQL however long one waits (a listener or a wake-up of the local app's
    own would bring it over), until the function runs."""
    product = f"p-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 5, 3)"),
                     {"p": product})  # fmt: skip
    key = marshal(PRODUCT_AVAILABILITY.key({"ProductId": product}))
    time.sleep(3)  # 12 of Lambda's polls, 30 of the drain's: long enough for any local wake-up
    assert "Item" not in app.client.get_item(TableName=app.tables["MainTable"], Key=key)
    assert app.function("sql_sync").invoke({})["claimed"] >= 1
    assert app.client.get_item(TableName=app.tables["MainTable"], Key=key)["Item"]["Stock"] == {"N": "3"}


def test_every_password_rotated_under_the_running_app_loses_nothing(app, engine):
    """Each login's password rotated as Secrets Manager's single-user rotation does it (the database
    first, then the secret's current value) while orders stream in, and every session of the old
    passwords cut, so warm functions must log in again: each reads its secret once more (its cached
    copy is minutes old), and nothing is lost or dead-lettered."""
    tag = uuid.uuid4().hex[:6]
    with engine.connect() as conn:
        dead_before = conn.execute(sa.text("SELECT count(*) FROM dead_letters")).scalar_one()
    assert call(app, "PUT", f"/customers/{tag}-c", {"Name": "Before", "Email": "b@example.com"})[0] == 200
    written, stop = [], threading.Event()

    def orders() -> None:
        while not stop.is_set() and len(written) < 400:
            order = {"OrderId": f"{tag}-o{len(written)}", "CustomerId": f"{tag}-c", "Status": "OPEN",
                     "CreatedAt": "2031-05-06T10:00:00.000Z", "Version": 1, "Total": 5}  # fmt: skip
            store.put(app.client, app.tables["MainTable"], ORDER, order)
            written.append(order["OrderId"])
            time.sleep(0.02)

    def landed() -> int:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM orders WHERE order_id LIKE :t"),
                                {"t": f"{tag}-o%"}).scalar_one()  # fmt: skip

    thread = threading.Thread(target=orders, daemon=True)
    thread.start()
    try:
        wait_for(lambda: landed() >= 10)  # the write-back is warm, logged in with the old password
        for user in app.logins.by_user:
            if user.startswith("hybridsync_"):
                app.logins.rotate(user, engine)
        with engine.begin() as conn:  # a warm container's connection goes (a proxy's, a restart's)
            cut = conn.execute(sa.text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                       "WHERE usename LIKE 'hybridsync\\_%'")).scalar_one()  # fmt: skip
        assert cut >= 2  # the write-back's and the API's at least
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join(timeout=30)
    wait_for(lambda: landed() == len(written), 60, lambda: (landed(), len(written)))
    assert call(app, "PUT", f"/customers/{tag}-c", {"Name": "After", "Email": "a@example.com"})[0] == 200
    assert call(app, "GET", f"/customers/{tag}-c")[1]["Name"] == "After"  # the reader logged in again
    assert "claimed" in app.function("sql_sync").invoke({})  # so did the writer's drain
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM dead_letters")).scalar_one() == dead_before
    assert app.failed_batches_stored() == 0


def test_a_wrong_method_over_the_socket_gets_405_and_unknown_paths_404(app):
    request = urllib.request.Request(
        f"http://127.0.0.1:{app.http.server_address[1]}/leaderboard", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request)
    assert (error.value.code, error.value.headers["Allow"]) == (405, "GET")


def test_status_counts_items_of_no_entity(app):
    """An item whose keys begin as an entity's but fit no template of the model: the write-back is
    invoked (its filter admits by prefix), applies nothing, and `status` shows it was there."""
    stranger = {
        "PK": {"S": f"CUSTOMER#{uuid.uuid4().hex[:6]}"},
        "SK": {"S": "ORDER#stranger"},
        "Note": {"S": "x"},
    }
    app.client.put_item(TableName=app.tables["MainTable"], Item=stranger)
    try:
        wait_for(lambda: app.status()["unplaced"] >= 1, 30, lambda: app.status()["functions"]["WriteBack"])
    finally:  # the session's table is shared: leave no stranger to the next test's reconcile
        app.client.delete_item(TableName=app.tables["MainTable"], Key={k: stranger[k] for k in ("PK", "SK")})


def test_status_reports_mappings_functions_queues_and_freshness(app):
    status = app.status()
    assert {m["function"] for m in status["mappings"].values()} == {"WriteBack", "Aggregate"}
    assert status["functions"]["WriteBack"]["invocations"] >= 1
    assert set(status["failure_queues"]) == set(app.queues)
    # each direction's freshness, from the `Freshness` its function's EMF lines put in the metrics
    assert set(status["freshness"]) == {"write_back", "aggregate", "sql_sync"}
    fresh = wait_for(lambda: app.status()["freshness"]["write_back"]["count"] and app.status()["freshness"])
    assert 0 <= fresh["write_back"]["p50_s"] <= fresh["write_back"]["p99_s"] < 60


def test_a_function_that_cannot_import_says_why_in_its_log(tmp_path):
    """As Lambda logs a failed init to the function's log group: every invocation fails with it,
    and the log holds the error and its trace (not an empty file)."""
    from hybridsync.local.awslambda.functions import FunctionError, LocalFunction

    (tmp_path / "asset").mkdir()
    (tmp_path / "asset" / "broken.py").write_text(
        "from nowhere_at_all import CUSTOMER\n\ndef handler(e, c): ...\n"
    )
    log = (tmp_path / "Broken.log").open("w")
    function = LocalFunction(
        "Broken", tmp_path / "asset", "broken.handler", dict(os.environ), 5, 128, log=log
    )
    try:
        with pytest.raises(FunctionError, match="nowhere_at_all"):
            function.invoke({})
    finally:
        function.close()
        log.close()
    logged = (tmp_path / "Broken.log").read_text()
    assert "Runtime.ImportModuleError: Unable to import module 'broken'" in logged and "Traceback" in logged


def raw(app, request: bytes) -> tuple[int, bytes]:
    """Bytes on a socket of their own, as no HTTP library would send them: (status, body)."""
    status, _, body = exchange(f"http://127.0.0.1:{app.http.server_address[1]}", request, timeout_s=30)
    return status, body


GET_WITH_BINARY_BODY = (
    b"GET /customers/c-1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 3\r\n\r\n\xff\xfe\x00"
)
MALFORMED = [
    (b"GET /leaderboard HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "Bad Request"),
    (b"GET /leaderboard HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "Bad Request"),
    # the API's one route is `ANY /{proxy+}`: any method reaches the function, which answers 405
    (b"FOO /leaderboard HTTP/1.1\r\nHost: x\r\n\r\n", 405, "FOO is not allowed on '/leaderboard'; use GET"),
    (b"GET /stores/CH/\xff HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Bad Request"),  # a path that is not UTF-8
    (GET_WITH_BINARY_BODY, 200, None),  # a body that is not UTF-8 reaches the function (base64): no drop
]  # fmt: skip


@pytest.mark.parametrize(("request_bytes", "status", "message"), MALFORMED)
def test_the_local_gateway_answers_every_malformed_request_as_api_gateway_does(app, request_bytes, status,
                                                                              message):  # fmt: skip
    code, body = raw(app, request_bytes)
    assert code == status or (message is None and code < 500), body
    if message:
        assert json.loads(body)["message"] == message


def test_a_raw_utf8_path_and_any_character_api_gateway_routes_reach_the_route(app):
    tag = uuid.uuid4().hex[:6]
    assert call(app, "PUT", f"/stores/CH/ZH/Zürich/{tag}", {"Name": "Bahnhof"})[0] == 200
    code, body = raw(
        app, "GET /stores/CH/ZH/Zürich HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    )  # not percent-encoded
    assert code == 200 and tag in [s["StoreId"] for s in json.loads(body)["stores"]]
    code, body = raw(app, b'GET /orders/a"b`c\\d HTTP/1.1\r\nHost: x\r\n\r\n')
    assert code == 404 and "no order" in json.loads(body)["message"]  # the route ran (was a 405 before)
