"""`hybridsync trace` on real components: an order line written to DynamoDB Local, its stream
records read by the write-back and the aggregation handlers (their log lines kept as the local app
keeps them, a file per function), its row in the embedded PostgreSQL."""

from __future__ import annotations

import json
import uuid

import pytest

from hybridsync.local.dynamodb.streams import every_record as scanned
from hybridsync.sync import trace
from shop.model import MODEL
from tests.handlers import LambdaContext, load

pytestmark = pytest.mark.integration


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """The test's log folder; a service name of its own: Powertools' logger of a name writes to the
    stdout of the test that made it first."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", f"trace-{uuid.uuid4().hex[:8]}")
    folder = tmp_path / "logs"
    folder.mkdir()
    return folder


def local(stack, engine, logs) -> trace.Sources:
    """What the command reads beside the running local app."""
    streams = scanned(stack.client("dynamodbstreams"))
    return trace.Sources(stack.client(), streams, trace.in_postgres(engine, MODEL), trace.local_lines(logs))


def kept(capfd, logs, function: str) -> None:
    """What a handler printed, appended to its log file (the local app sends a function's output there)."""
    out, err = capfd.readouterr()
    with (logs / f"{function}.log").open("a") as file:
        file.write(out + err)


def written_back_line(workload, stream, capfd) -> tuple[str, list]:
    """An order line put, its record read and given to the write-back, what it prints still to read:
    (its order's id, its records)."""
    oid = workload.id("o")
    workload.line(oid, 1, Quantity=1)
    records = stream.read()
    capfd.readouterr()
    load("write_back").handler({"Records": records}, LambdaContext())
    return oid, records


def test_a_trace_lists_the_records_the_invocations_the_aggregates_and_the_row_in_time_order(
    handler_env, stack, engine, workload, stream, logs, capfd, monkeypatch
):
    write_back = load("write_back")
    oid = workload.id("o")
    workload.line(oid, 1, Quantity=2)
    workload.line(oid, 1, Quantity=3)
    records = stream.read()
    capfd.readouterr()
    write_back.handler({"Records": records}, LambdaContext())
    kept(capfd, logs, "WriteBack")
    monkeypatch.setenv("TABLE_MAIN", stack.with_tables("trace", streams=False).table_names["main"])
    aggregate = load("aggregate")  # folds into tables of its own: no other test's stream sees them
    aggregate.handler({"Records": records, "shardId": stream.shard}, LambdaContext())
    kept(capfd, logs, "Aggregate")

    keys = records[0]["dynamodb"]["Keys"]
    key = {name: value["S"] for name, value in keys.items()}
    sources = local(stack, engine, logs)
    events = trace.trace(MODEL, "main", key, stack.table_names, sources)
    kinds = [e.kind for e in events]
    assert kinds[0] == "stream_record" and kinds[-1] == "row", kinds
    first, second = (e.detail for e in events if e.kind == "stream_record")
    assert (first["event"], second["event"]) == ("INSERT", "MODIFY")
    # each record, then what happened to it: read by both consumers, what it moved
    for n, event in enumerate(events[:-1]):
        if event.kind != "stream_record":
            (at,) = [i for i, e in enumerate(events) if e.kind == "stream_record"
                     and e.detail["sequence"] == event.detail["sequence"]]  # fmt: skip
            assert at < n, kinds
    read = [e.detail for e in events if e.kind == "invocation"]
    assert {(r["function"], r["message"]) for r in read} == {("WriteBack", "changes written back"),
                                                             ("Aggregate", "changes folded")}  # fmt: skip
    assert {r["sequence"] for r in read} == {first["sequence"], second["sequence"]}
    assert all(r["request"] and r["freshness_s"] is not None for r in read)
    units = [e.detail for e in events if e.kind == "aggregate" and e.detail["aggregate"] == "Sales"]
    assert [u["delta"]["Units"] for u in units] == ["2", "2", "1", "1"]  # a day's and a month's, each
    assert all(u["folded"] for u in units)
    row = events[-1].detail
    assert row["entity"] == "OrderLine" and row["row"]["quantity"] == 3
    assert row["stream_position"] is not None
    again = [trace.Event.from_json(json.loads(json.dumps(e.as_json()))) for e in events]  # --json's
    assert [(e.kind, e.detail) for e in again] == [(e.kind, e.detail) for e in events]


def test_a_trace_finds_the_dead_letter_of_a_refused_change(
    handler_env, stack, engine, workload, stream, logs, capfd
):
    write_back = load("write_back")
    oid = workload.id("o")
    workload.line(oid, 1, Quantity="two")  # a string where the model declares an integer
    records = stream.read()
    capfd.readouterr()
    write_back.handler({"Records": records}, LambdaContext())
    kept(capfd, logs, "WriteBack")
    key = {name: value["S"] for name, value in records[0]["dynamodb"]["Keys"].items()}
    sources = local(stack, engine, logs)
    events = trace.trace(MODEL, "main", key, stack.table_names, sources)
    (letter,) = [e.detail for e in events if e.kind == "dead_letter"]
    assert letter["consumer"] == "write_back" and "Quantity must be an integer" in letter["reason"]
    (read,) = [e.detail for e in events if e.kind == "invocation"]
    assert read["batch"]["dead_letters"] == 1
    assert [e.detail["row"] for e in events if e.kind == "row"] == [None]  # it has no row
    with pytest.raises(ValueError, match="no table 'nope'"):
        trace.trace(MODEL, "nope", key, stack.table_names, sources)
    # a customer whose id holds LIKE's wildcards and a letter JSON escapes: its letter is found all the same
    odd = workload.line(workload.id("o"), 1, customer="Zoë_%", Quantity="two")
    records = stream.read()
    write_back.handler({"Records": records}, LambdaContext())
    key = {name: value["S"] for name, value in records[0]["dynamodb"]["Keys"].items()}
    assert "Zoë_%" in key["PK"] and odd["Quantity"] == "two"
    (found,) = [
        e for e in trace.trace(MODEL, "main", key, stack.table_names, sources) if e.kind == "dead_letter"
    ]
    assert "Quantity must be an integer" in found.detail["reason"]


def test_the_command_prints_the_trace_as_json_or_text_and_says_what_is_wrong(
    handler_env, stack, workload, stream, logs, capfd
):
    from hybridsync import cli

    oid, records = written_back_line(workload, stream, capfd)
    kept(capfd, logs, "WriteBack")
    pairs = [f"{name}={value['S']}" for name, value in records[0]["dynamodb"]["Keys"].items()]
    state = str(logs.parent)
    assert cli.main(["trace", "main", *pairs, "--json", "--state-dir", state]) == 0
    said = json.loads(capfd.readouterr().out)
    # what it moves, though not folded yet: a day's and a month's sales, a month's spend
    assert [e["kind"] for e in said] == ["stream_record", "invocation", *["aggregate"] * 3, "row"]
    assert not any(e["folded"] for e in said if e["kind"] == "aggregate")
    # an entity and its sql_key: the same item, its key made from its row
    assert cli.main(["trace", "OrderLine", f"OrderId={oid}", "LineNo=1", "--json", "--state-dir", state]) == 0
    assert json.loads(capfd.readouterr().out) == said
    assert cli.main(["trace", "main", *pairs, "--state-dir", state]) == 0
    text = capfd.readouterr().out.splitlines()
    assert len(text) == 6 and "invocation" in text[1] and "function=WriteBack" in text[1]
    for argv, says in (
        (["trace", "nope", *pairs], "no table or synced entity 'nope' in the model"),
        (
            ["trace", "OrderLine", f"OrderId={oid}"],
            "OrderLine is found by its sql_key: give OrderId=... LineNo",
        ),
        (
            ["trace", "OrderLine", "OrderId=none", "LineNo=1"],
            "no row of OrderLine with OrderId=none LineNo=1",
        ),
        (["trace", "main", pairs[0]], "main's key is PK, SK"),
        (["trace", "main", "PK"], "each key attribute as ATTR=VALUE"),
        (["trace", "main", *pairs, "--since", "yesterday"], "--since 'yesterday'"),
        (["trace", "main", *pairs, "--state-dir", str(logs / "none")], "is `hybridsync up` running"),
        (["trace", "main", *pairs, "--deployed", "NoSuchStack"], "--deployed NoSuchStack: "),
    ):
        with pytest.raises(SystemExit, match=says):
            cli.main([*argv, *([] if "--state-dir" in argv else ["--state-dir", state])])


def test_deployed_the_trace_reads_the_stacks_log_groups_and_asks_its_operations_function(
    handler_env, stack, engine, workload, stream, logs, capfd, monkeypatch
):
    """`--deployed STACK`: the lines from the stack's functions' log groups (Logs Insights, moto
    server's here), the dead letters and the row from its operations function (its code run here,
    as in the function: `operations.perform`)."""
    from hybridsync import cli
    from hybridsync.cli import common
    from hybridsync.runtime import aws
    from hybridsync.sync import operations
    from hybridsync.sync.jobs import Services

    _, records = written_back_line(workload, stream, capfd)
    printed = [t for t in capfd.readouterr().out.splitlines() if t.startswith("{")]
    lines = [
        t for t in printed if "timestamp" in json.loads(t)
    ]  # its log lines, as written (not its metrics)
    name, group = f"T{uuid.uuid4().hex[:8]}-pipeline", f"/aws/lambda/t{uuid.uuid4().hex[:8]}-WriteBack"
    template = {
        "Resources": {"WriteBackLogs": {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": group}}}
    }
    aws.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))
    cloudwatch = aws.client("logs")
    cloudwatch.create_log_stream(logGroupName=group, logStreamName="2026/11/30/[$LATEST]1")
    written = [
        {"timestamp": int(trace._when(json.loads(t)["timestamp"]) * 1000), "message": t} for t in lines
    ]
    cloudwatch.put_log_events(logGroupName=group, logStreamName="2026/11/30/[$LATEST]1", logEvents=written)
    services = Services(stack.client(), engine, MODEL, stack.table_names, aws.client)
    asked: list[dict] = []

    def deployed(args, event):
        asked.append(event)
        return json.loads(json.dumps(operations.perform(services, event, lambda: 900.0), default=str))

    monkeypatch.setattr(common, "deployed", deployed)
    pairs = [f"{key}={value['S']}" for key, value in records[0]["dynamodb"]["Keys"].items()]
    assert cli.main(["trace", "main", *pairs, "--json", "--deployed", name]) == 0
    said = json.loads(capfd.readouterr().out)
    assert [e["kind"] for e in said] == ["stream_record", "invocation", *["aggregate"] * 3, "row"]
    assert said[-1]["row"]["quantity"] == 1 and [a["operation"] for a in asked] == ["trace"]
    with pytest.raises(SystemExit, match="has no log group"):
        aws.client("cloudformation").create_stack(StackName=f"{name}-x", TemplateBody=json.dumps(
            {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}))  # fmt: skip
        cli.main(["trace", "main", *pairs, "--deployed", f"{name}-x"])


def test_a_postgresql_mastered_item_shows_its_outbox_rows_and_each_drains_put_before_its_record(
    handler_env, stack, engine, stream, logs, capfd
):
    """Written in PostgreSQL: its outbox rows, the drain's put of its view (the newest applied, the
    older superseded by it), then the view's record in the table's stream, which the write-back
    reads and skips (a change from PostgreSQL is not written back)."""
    import sqlalchemy as sa

    from hybridsync.sync.outbox import mastered_tables

    pid = f"p-{uuid.uuid4().hex[:8]}"
    insert = "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, 10, 5)"
    with engine.begin() as conn:
        conn.execute(sa.text(insert), {"p": pid})
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE product_availability SET stock = 4 WHERE product_id = :p"), {"p": pid})
    sql_sync = load("sql_sync")
    capfd.readouterr()
    sql_sync.handler({}, LambdaContext())  # one drain: both rows of the key at once
    kept(capfd, logs, "SqlSync")
    load("write_back").handler({"Records": stream.read()}, LambdaContext())
    kept(capfd, logs, "WriteBack")
    entity = mastered_tables(MODEL)["product_availability"]
    key = {name: str(value) for name, value in entity.key({"ProductId": pid}).items()}
    events = trace.trace(MODEL, "main", key, stack.table_names, local(stack, engine, logs))
    kinds = [e.kind for e in events]
    assert kinds == ["outbox", "outbox", "put", "put", "stream_record", "invocation"], kinds
    puts = {e.detail["version"]: e.detail["fate"] for e in events if e.kind == "put"}
    assert sorted(puts.values()) == ["applied", "superseded"] and puts[max(puts)] == "applied"
    assert events[-1].detail["batch"]["skipped"] >= 1  # from PostgreSQL: not written back


def test_an_outbox_rows_dead_letter_is_traced_to_the_item_its_view_would_have_been(
    handler_env, stack, engine, logs, capfd
):
    """A row no view can hold (a price past DynamoDB's 38 digits): the drain dead-letters its
    outbox row, whose letter names the row's key, not the item's; the trace places it."""
    import sqlalchemy as sa

    from hybridsync.sync.outbox import mastered_tables

    pid = f"p-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        insert = "INSERT INTO product_availability (product_id, price, stock) VALUES (:p, :price, 1)"
        conn.execute(sa.text(insert), {"p": pid, "price": "1e130"})
    capfd.readouterr()
    load("sql_sync").handler({}, LambdaContext())
    kept(capfd, logs, "SqlSync")
    entity = mastered_tables(MODEL)["product_availability"]
    key = {name: str(value) for name, value in entity.key({"ProductId": pid}).items()}
    events = trace.trace(MODEL, "main", key, stack.table_names, local(stack, engine, logs))
    kinds = [e.kind for e in events]
    assert kinds == ["outbox", "put", "dead_letter"], kinds
    (letter,) = [e for e in events if e.kind == "dead_letter"]
    assert letter.detail["consumer"] == "sql_sync" and letter.detail["outbox"] == events[0].detail["outbox"]
    assert events[1].detail["fate"] == "dead letter"
    other = {name: value.replace(pid, "p-other") for name, value in key.items()}  # not another item's
    assert "dead_letter" not in [e.kind for e in trace.trace(MODEL, "main", other, stack.table_names,
                                                             local(stack, engine, logs))]  # fmt: skip


def test_a_retried_batch_shows_each_attempt_and_a_bisected_one_its_half(
    handler_env, stack, engine, workload, stream, logs, capfd
):
    """The write-back takes two orders' records, then again (a retry), then only the first (the
    mapping bisected the batch): the first order's record shows attempts 1, 2 and 3, the last one
    on a half of the batch."""
    write_back = load("write_back")
    first, second = workload.id("o"), workload.id("o")
    workload.order(first)
    workload.order(second)
    records = stream.read()
    capfd.readouterr()
    for batch in (records, records, records[:1]):
        write_back.handler({"Records": batch}, LambdaContext())
    kept(capfd, logs, "WriteBack")
    key = {name: value["S"] for name, value in records[0]["dynamodb"]["Keys"].items()}
    events = trace.trace(MODEL, "main", key, stack.table_names, local(stack, engine, logs))
    read = [e.detail for e in events if e.kind == "invocation"]
    assert [r["attempt"] for r in read] == [1, 2, 3], read
    assert [r["batch"]["records"] for r in read] == [2, 2, 1]
    assert [r.get("bisected") for r in read] == [None, None, "1 of 2 records"]
    assert read[0]["batch"]["first"] == str(int(records[0]["dynamodb"]["SequenceNumber"]))


def test_a_batch_the_mapping_gave_up_on_is_found_in_the_failure_bucket(handler_env, stack, engine, workload,
                                                                      stream, logs):  # fmt: skip
    """Past its retries, a batch's invocation record goes to the failure bucket with its records:
    the trace finds the item's record there, a dead letter of the batch's consumer."""
    from hybridsync.local.awslambda.mappings import failure_record
    from hybridsync.sync import failed

    oid = workload.id("o")
    workload.order(oid)
    records = stream.read()
    s3, bucket = stack.client("s3"), f"trace-failed-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    function = "arn:aws:lambda:us-east-1:1:function:x-WriteBack"
    info = failure_record(records, stream_arn=records[0]["eventSourceARN"], shard=stream.shard,
                          function_arn=function, condition="RetryAttemptsExhausted", invokes=11)  # fmt: skip
    s3.put_object(Bucket=bucket, Key=f"aws/lambda/x/{stream.shard}/batch-1",
                  Body=json.dumps(info | {"payload": {"Records": records}}))  # fmt: skip
    sources = local(stack, engine, logs)
    sources.failed = failed.BucketStore(s3, bucket).pending
    key = {name: value["S"] for name, value in records[0]["dynamodb"]["Keys"].items()}
    (letter,) = [e.detail for e in trace.trace(MODEL, "main", key, stack.table_names, sources)
                 if e.kind == "dead_letter"]  # fmt: skip
    assert letter["failed_batch"] == f"s3://{bucket}/aws/lambda/x/{stream.shard}/batch-1"
    assert letter["consumer"] == "write_back" and "RetryAttemptsExhausted, 11 attempts" in letter["reason"]
    assert letter["sequence"] == str(int(records[0]["dynamodb"]["SequenceNumber"]))
