"""The operator commands against the session's local stack."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from hybridsync import cli
from hybridsync.dynamodb import exports, scans
from hybridsync.local.awslambda.mappings import failure_record
from hybridsync.sync import writeback
from shop.model import MODEL


@pytest.fixture
def env(handler_env):
    return handler_env


def test_model_prints_every_table_and_index(capsys):
    assert cli.main(["model"]) == 0
    out = capsys.readouterr().out
    for name in ("OrdersByTime", "OpenOrders", "Rankings", "Inverted", "DistinctKeys", "OrderLine"):
        assert name in out


def test_reconcile_reports_drift_and_repairs_it(env, engine, workload, stream, capsys):
    oid = workload.id("o")
    workload.order(oid)  # in DynamoDB, never written back: drift
    stream.read()
    assert cli.main(["reconcile", "--segments", "2"]) == 1
    out = capsys.readouterr().out
    assert "missing" in out and "read units by the model" in out  # what its scan cost
    cli.main(["reconcile", "--repair"])
    assert "repaired" in capsys.readouterr().out
    with engine.connect() as conn:
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM orders WHERE order_id = %s", (oid,)).scalar_one() == 1
        )


def test_reconcile_is_paced_by_default_and_reads_an_export_instead_of_the_table(
    env, engine, workload, stream, stack, capsys
):
    assert cli.parser().parse_args(["reconcile"]).rate == scans.DEFAULT_RATE > 0
    oid = workload.id("o")
    workload.order(oid)  # in DynamoDB, never written back: drift
    stream.read()
    s3, table = stack.client("s3"), stack.table_names["main"]
    export = exports.by_scan(stack.client(), s3, table, stack.bucket_names["bodies"], "exports/main")
    assert cli.main(["reconcile", "--from-export", export.url]) == 1
    out = capsys.readouterr().out
    assert (
        "read from the export, not the table (0 read units)" in out and "read units by the model" not in out
    )
    (orders,) = [line.split() for line in out.splitlines() if line.startswith("Order ")]
    assert int(orders[2]) >= 1  # missing: ours (others' orders of the shared table may be too)
    with pytest.raises(SystemExit, match="not one of the model's tables"):
        other = exports.by_scan(stack.client(), s3, stack.table_names["chunks"], stack.bucket_names["bodies"],
                                "exports/chunks")  # fmt: skip
        cli.main(["reconcile", "--table", table, "--from-export", other.url])
    with pytest.raises(SystemExit, match="no export at"):
        cli.main(["reconcile", "--from-export", f"s3://{stack.bucket_names['bodies']}/nothing/here/"])
    cli.main(["reconcile", "--repair", "--from-export", export.url])
    assert "repaired" in capsys.readouterr().out
    with engine.connect() as conn:  # ours landed, from the export
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM orders WHERE order_id = %s", (oid,)).scalar_one() == 1
        )


def test_cost_prices_write_sharding_and_a_scan_at_a_rate(capsys):
    assert cli.main(["cost", "write-sharding", "--shards", "8", "--json"]) == 0
    rows = {(r["pattern"], r["naive"]): r for r in json.loads(capsys.readouterr().out)}
    one_random, one_calculated = (
        rows[("one item, sharded partition", True)],
        rows[("one item, sharded partition", False)],
    )
    assert (one_random["requests"], one_calculated["requests"]) == (8, 1)
    assert (
        rows[("a period, sharded partition", True)]["read_units"]
        == rows[("a period, sharded partition", False)]["read_units"]
    )
    assert cli.main(["cost", "scan", "--table-gb", "20", "--rate", "1000"]) == 0
    out = capsys.readouterr().out
    assert "2,621,630 read units" in out and "43.7 minutes at 1000 units/s" in out and "10 segments" in out
    cli.main(["cost", "scan", "--table-gb", "5"])
    assert "not warranted" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="must be positive"):
        cli.main(["cost", "scan", "--table-gb", "0"])


def test_dead_letters_list_and_redrive(env, engine, workload, stream, capsys):
    order = workload.order(workload.id("o"))
    (record,) = stream.read()
    workload.delete("Order", **order)  # gone since: a redrive has only the stored record
    record["dynamodb"]["NewImage"]["Version"] = {"N": "1.5"}  # a writer's version, not an integer
    writeback.write_back([record], engine, MODEL, truth=None)  # a first record: nothing to settle
    assert cli.main(["dead-letters", "list", "--source", "write_back"]) == 0
    assert "Version must be an integer" in capsys.readouterr().out
    assert cli.main(["dead-letters", "redrive", "--source", "write_back"]) == 1  # still bad
    assert "still rejected" in capsys.readouterr().out


def test_failed_batches_list_and_redrive(env, engine, workload, stream, stack, monkeypatch, capsys):
    """A write-back batch the mapping gave up on while PostgreSQL was away, stored with its records in
    the failure bucket as Lambda stores it: listed, then redriven into PostgreSQL; a queue's batch
    whose names tell no consumer stays, with the reason."""
    oid = workload.id("o")
    workload.order(oid)
    workload.order(oid, Status="SHIPPED")
    records = stream.read()
    info = failure_record(records, stream_arn=stream.stream_arn, shard=stream.shard, invokes=11,
                          function_arn="arn:aws:lambda:us-east-1:1:function:x-WriteBackFunction-1:live",
                          condition="RetryAttemptsExhausted")  # fmt: skip
    s3, sqs = stack.client("s3"), stack.client("sqs")
    bucket = f"{workload.prefix.lower()}-failedbatches"
    s3.create_bucket(Bucket=bucket)
    key = f"aws/lambda/{uuid.uuid4()}/{stream.shard}/2026/11/26/2026-11-26T10.00.00-{uuid.uuid4()}"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(info | {"payload": {"Records": records}}))
    queue = sqs.create_queue(QueueName=f"{workload.prefix}-Q")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(info | {"requestContext": {}}))
    with pytest.raises(SystemExit, match="no failure bucket"):
        cli.main(["failed-batches", "list"])
    monkeypatch.setenv("FAILED_BATCHES_BUCKET", bucket)
    assert cli.main(["failed-batches", "list"]) == 0
    out = capsys.readouterr().out
    assert "write_back" in out and "RetryAttemptsExhausted" in out and "records kept" in out
    assert "1 failed batch(es), 2 record(s)" in out
    assert (
        cli.main(["failed-batches", "redrive", "--store", bucket, "--store", queue]) == 1
    )  # the queue's stays
    out = capsys.readouterr().out
    assert "redriven: 1 batch(es), 2 record(s)" in out and "no consumer is named" in out
    with engine.connect() as conn:
        status = conn.exec_driver_sql("SELECT status FROM orders WHERE order_id = %s", (oid,)).scalar_one()
    assert status == "SHIPPED"
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0  # redriven: removed


def test_top_reads_any_ranked_aggregate_and_validates(env, capsys):
    assert cli.main(["top", "Sales", "--day", "2026-11-22", "--n", "5"]) == 0
    assert "top 5 of Sales by Units, 2026-11-22" in capsys.readouterr().out
    assert cli.main(["top", "Sales", "--day", "2026-11-22", "--n", "5", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["aggregate"], answer["period"], type(answer["top"])) == ("Sales", "2026-11-22", list)
    with pytest.raises(SystemExit, match="day must look like"):
        cli.main(["top", "Sales", "--day", "22.11.2026"])
    with pytest.raises(SystemExit, match="kept by month only"):
        cli.main(["top", "CustomerSpend", "--day", "2026-11-22"])
    with pytest.raises(SystemExit, match="no aggregate 'Revenue'; the ranked ones: Sales, CustomerSpend"):
        cli.main(["top", "Revenue", "--month", "2026-11"])
    with pytest.raises(SystemExit, match="n must be between 1 and 100"):
        cli.main(["top", "Sales", "--month", "2026-11", "--n", "500"])


def test_db_commands_need_a_database(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(SystemExit, match="DATABASE_URL"):
        cli.main(["migrations", "current"])


def test_distinct_keys_three_ways_agree(env, capsys):
    counts = []
    for way in ("index", "skip-scan", "scan"):
        assert cli.main(["distinct-keys", "--by", way]) == 0
        captured = capsys.readouterr()
        assert "read units by the model" in captured.err
        counts.append(sorted(captured.out.split()))
    # the index lists the collections the write path keeps a #static item for; the scans see all
    assert set(counts[0]) <= set(counts[1]) == set(counts[2])


def test_cost_prints_the_seeds_scenario_as_json(capsys):
    assert cli.main(["cost", "distinct-keys", "--keys", "2000000", "--items-per-key", "1000",
                     "--item-size", "500", "--json"]) == 0  # fmt: skip
    rows = {r["design"]: r for r in json.loads(capsys.readouterr().out)}
    assert [r["naive"] for r in rows.values()] == [True, False, False]
    assert {r["read_units"] for r in rows.values()} == {122079161.0, 36624.0, 1000000.5}


def test_timeseries_commands(env, stack, capsys, monkeypatch):
    monkeypatch.setenv("BUCKET_BODIES", stack.bucket_names["bodies"])
    prefix = "cli-ts"
    assert cli.main(["timeseries", "rotate", "--prefix", prefix, "--at", "2026-11-22T10:00:00Z"]) == 0
    assert f"{prefix}-events-2026-11-22, {prefix}-events-2026-11-23" in capsys.readouterr().out
    assert cli.main(["timeseries", "list", "--prefix", prefix]) == 0
    assert "2026-11-23" in capsys.readouterr().out
    assert cli.main(["timeseries", "query", "--prefix", prefix, "--source", "d", "--from", "2026-11-21",
                     "--to", "2026-11-22"]) == 0  # fmt: skip
    assert "2026-11-21" in capsys.readouterr().err  # no table for that day
    with pytest.raises(SystemExit, match="--at needs a timezone"):
        cli.main(["timeseries", "rotate", "--prefix", prefix, "--at", "2026-11-22T10:00:00"])


def test_every_tool_survives_items_it_cannot_interpret_and_names_them(env, stack, monkeypatch, capsys):
    """Issue 30, row 3: a lone surrogate stored in an item made `reconcile` crash (UnicodeEncodeError
    in capacity). Items no writer of the model made (a surrogate, a number where text belongs, an
    entity nobody declared) are counted and named by every tool; none stops."""
    client, name = stack.client(), f"hostile-{time.time_ns() % 10**8}"
    client.create_table(**MODEL.tables[0].create_request(name))
    line = {"PK": {"S": "CUSTOMER#c\ud800"}, "SK": {"S": "ORDER#2026-11-22T10:00:00.000Z#o1#LINE#0001"},
            "Entity": {"S": "OrderLine"}, "OrderId": {"S": "o1"}, "CustomerId": {"S": "c\ud800"},
            "CreatedAt": {"S": "2026-11-22T10:00:00.000Z"}, "Status": {"S": "OPEN"}, "LineNo": {"N": "1"},
            "ProductId": {"S": "p1"}, "Quantity": {"N": "2"}, "UnitPrice": {"N": "2.5"},
            "Version": {"N": "1"}}  # fmt: skip
    client.put_item(TableName=name, Item=line)
    client.put_item(TableName=name, Item=line | {"PK": {"S": "CUSTOMER#c2"}, "CustomerId": {"S": "c2"},
                                                 "Quantity": {"S": "two"}})  # fmt: skip
    client.put_item(
        TableName=name, Item={"PK": {"S": "Z\ud800"}, "SK": {"S": "Z"}, "Entity": {"S": "Nobody"}}
    )
    unversioned = {k: v for k, v in line.items() if k != "Version"}  # another service's plain PutItem
    client.put_item(
        TableName=name, Item=unversioned | {"PK": {"S": "CUSTOMER#c3"}, "CustomerId": {"S": "c3"}}
    )
    monkeypatch.setenv("TABLE_MAIN", name)
    assert cli.main(["reconcile"]) in (0, 1)  # no crash (the session's rows are drift to this table)
    out = capsys.readouterr().out
    assert "CustomerId is not valid Unicode" in out and "Quantity must be an integer" in out, out
    # it crashed on it (issue 42's KeyError): now compared by its values like any item, set aside no more
    assert "CUSTOMER#c3" not in out and "o1/1" in out, out
    for by in ("scan", "skip-scan"):
        assert cli.main(["distinct-keys", "--by", by]) == 0
        assert "CUSTOMER#c\\ud800" in capsys.readouterr().out  # listed, shown escaped
    assert cli.main(["reindex", "--dry-run"]) in (0, 1)
    assert cli.main(["cost", "--keys", "10"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_dashboard_prints_the_deployed_dashboards_url(env, stack, capsys):
    """The monitoring stack's outputs, read back (moto's CloudFormation stands in for a deployed stack)."""
    name = f"T{uuid.uuid4().hex[:6]}-monitoring"
    url = "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards:name=d"
    template = {
        "Resources": {"AlarmTopic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"DashboardUrl": {"Value": url}, "AlarmTopicArn": {"Value": {"Ref": "AlarmTopic"}}},
    }
    stack.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))
    assert cli.main(["dashboard", "--stack", name]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == url and out[1].startswith("alarms go to arn:aws:sns:")
    with pytest.raises(SystemExit, match="no-such-monitoring"):
        cli.main(["dashboard", "--stack", "no-such-monitoring"])


def test_up_on_a_taken_port_says_so_before_it_starts_anything(tmp_path, monkeypatch):
    import socket

    from hybridsync.local import template

    def synth(*_: object, **__: object) -> None:
        raise AssertionError("hybridsync up went on to start the app")

    monkeypatch.setattr(template, "synth_if_stale", synth)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as refused:
            cli.main(["up", "--port", str(port), "--state-dir", str(tmp_path / ".local")])
    assert str(refused.value).startswith(f"hybridsync up: --port {port}: 127.0.0.1:{port} is not free (")
    assert str(refused.value).endswith("give another port, or leave --port out and a free one is picked")
