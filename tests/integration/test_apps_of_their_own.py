"""Apps of their own on the session's servers: `hybridsync up --once`, a restart, `hybridsync
invoke`. Each sets the logins' passwords on the session's PostgreSQL, as a deploy does, so none may
run while another app on those servers is serving (test_local_app's module app once answered a
503 when its next container logged in with the password these had replaced): a module of their
own, run one at a time, each stopping what it started."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.local.app import LocalApp
from hybridsync.local.template import Assembly
from hybridsync.model.convert import marshal
from shop.model import ORDER, ORDER_LINE, SALES
from tests.integration.test_local_app import esm, wait_for


def test_up_brings_the_whole_app_up_and_tells_where_everything_is(cloud_assembly, stack, tmp_path):
    import os
    import subprocess
    import sys

    prefix = f"up{uuid.uuid4().hex[:4]}"
    env = os.environ | {"DYNAMODB_ENDPOINT": stack.dynamodb_endpoint, "DATABASE_URL": stack.database_url}
    result = subprocess.run(
        [sys.executable, "-m", "hybridsync.cli", "up", "--once", "--no-synth",
         "--assembly", str(cloud_assembly), "--state-dir", str(tmp_path), "--prefix", prefix],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected_lines = (
        "WriteBack",
        "Aggregate",
        "Api",
        "SqlSync",
        "batch 1000, window 0s",
        "each run polls the outbox every 250 ms",
        "tumbling 60s",
        "checked against its role's policies",
        f"{prefix}-main",
    )
    for expected in expected_lines:
        assert expected in result.stdout, expected
    assert f"export TABLE_MAIN='{prefix}-main'" in (tmp_path / "env").read_text()


def test_a_restart_resumes_from_the_saved_positions_and_ends_as_one_clean_pass(cloud_assembly, stack, engine,
                                                                               tmp_path):  # fmt: skip
    def started():
        assembly = Assembly.load(cloud_assembly)
        for function in ("WriteBack", "Aggregate"):
            esm(assembly, function).properties.update(MaximumBatchingWindowInSeconds=0)
        running = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path, prefix="restart")
        running.start(http_port=None, schedules=False)
        return running

    tag = uuid.uuid4().hex[:6]

    def write(app, numbers):
        for n in numbers:
            values = {"OrderId": f"{tag}-o{n}", "CustomerId": f"{tag}-c", "Status": "OPEN", "Version": 1,
                      "CreatedAt": "2031-08-09T10:00:00.000Z"}  # fmt: skip
            store.put(app.client, app.tables["MainTable"], ORDER, values | {"Total": Decimal("2")})
            store.put(app.client, app.tables["MainTable"], ORDER_LINE, values | {
                "LineNo": 1, "ProductId": f"{tag}-p", "Quantity": 1, "UnitPrice": Decimal("2")})  # fmt: skip

    def landed(count):
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT count(*) FROM order_lines WHERE order_id LIKE :t"), {"t": f"{tag}%"}
            )
            return rows.scalar_one() == count

    def delivered(app):
        return {p.settings.name.split(":")[0]: p.stats.delivered for p in app.pollers}

    first = started()
    write(first, range(10))
    wait_for(lambda: landed(10))
    first.stop()  # in the middle of the run: ten more orders come while nothing consumes
    before = delivered(first)
    write(first, range(10, 20))
    second = started()
    try:
        counts = lambda: f"before the stop {before}, after {delivered(second)}"  # noqa: E731
        wait_for(lambda: landed(20), 60, counts)
        # across the stop, every record went to each function once: none again, none lost
        wait_for(lambda: before["WriteBack"] + delivered(second)["WriteBack"] == 40, 60, counts)  # 20 + 20
        # an order's keys begin as its lines' do: the aggregation's prefix filter admits both, and
        # its function places each record by its keys and folds only the lines
        wait_for(lambda: before["Aggregate"] + delivered(second)["Aggregate"] == 40, 60, counts)
        key = marshal(SALES.key({"ProductId": f"{tag}-p", "Period": "2031-08-09"}))
        sales = wait_for(lambda: second.client.get_item(TableName=second.tables["MainTable"], Key=key,
                                                        ConsistentRead=True).get("Item"))  # fmt: skip
        assert sales["Units"] == {"N": "20"}  # every line counted once across the restart
    finally:
        second.stop()


def test_invoke_runs_one_function_with_one_event(cloud_assembly, stack, tmp_path, monkeypatch, capsys):
    from hybridsync import cli
    from tests import events

    monkeypatch.setenv("DYNAMODB_ENDPOINT", stack.dynamodb_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT", stack.services_endpoint)  # the logins' secrets
    monkeypatch.setenv("DATABASE_URL", stack.database_url)
    common = ["--no-synth", "--assembly", str(cloud_assembly), "--state-dir", str(tmp_path)]
    event = events.HERE / "review_insert.json"  # not the write-back's: it answers without writing
    assert cli.main(["invoke", "write_back", "--event", str(event), *common]) == 0
    assert json.loads(capsys.readouterr().out) == {"batchItemFailures": []}
    (tmp_path / "empty.json").write_text("{}")
    assert cli.main(["invoke", "WriteBack", "--event", str(tmp_path / "empty.json"), *common]) == 1
    assert json.loads(capsys.readouterr().out)["errorType"] == "KeyError"  # as Lambda reports it
    with pytest.raises(SystemExit, match="hybridsync invoke: no function 'nothing'; the app has Aggregate"):
        cli.main(["invoke", "nothing", *common])


def test_invoke_aggregate_answers_tumbling_window_events_with_state(cloud_assembly, stack, tmp_path,
                                                                     monkeypatch, capsys):  # fmt: skip
    """The batch and the final invocation of a window, shaped as Lambda's developer guide documents
    them (services-ddb-windows): each answer carries `state`, or Lambda would count it failed."""
    from hybridsync import cli
    from tests import events

    monkeypatch.setenv("DYNAMODB_ENDPOINT", stack.dynamodb_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT", stack.services_endpoint)
    monkeypatch.setenv("DATABASE_URL", stack.database_url)
    common = ["--no-synth", "--assembly", str(cloud_assembly), "--state-dir", str(tmp_path)]
    common += ["--prefix", "test"]  # the session's tables
    shard, state = f"shard-{uuid.uuid4().hex[:8]}", {"1": "state1"}
    batch = events.window_event([events.documented_record()], shard, state)
    for name, event in {"batch": batch, "final": events.window_event([], shard, state, final=True)}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(event))
        assert cli.main(["invoke", "aggregate", "--event", str(tmp_path / f"{name}.json"), *common]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert isinstance(answer["state"], dict) and answer["batchItemFailures"] == [], name
