"""Event source mapping semantics on real stream records (moto server), each with a scripted function."""

from __future__ import annotations

import json
import threading
import time
import uuid
from decimal import Decimal
from types import SimpleNamespace

import pytest

from hybridsync.dynamodb import store
from hybridsync.local.awslambda.functions import FunctionError
from hybridsync.local.awslambda.mappings import Checkpoints, Settings, ShardPoller
from shop.model import MODEL


@pytest.fixture
def table(stack):
    """A table of its own per test (its own stream), created from the model's declaration."""

    client = stack.client()
    name = f"esm-{uuid.uuid4().hex[:8]}"
    client.create_table(**MODEL.table("main").create_request(name))
    arn = client.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    return client, name, arn


def put_scores(client, table, players, version=1):
    for player in players:
        store.put(
            client, table, MODEL.entity("PlayerScore"), {"PlayerId": player, "Score": 1, "Version": version}
        )


class Scripted:
    """A function that records what it was given and fails as told."""

    def __init__(self, fail=lambda event: None):
        self.events: list[dict] = []
        self.fail = fail

    def __call__(self, event):
        self.events.append(json.loads(json.dumps(event)))
        outcome = self.fail(event)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome or {"batchItemFailures": []}

    def players(self):
        return [[r["dynamodb"]["NewImage"]["PlayerId"]["S"] for r in e["Records"]] for e in self.events]


def poller(stack, table, function, tmp_path, failures=None, **settings):
    arn = table[2]
    streams = stack.client("dynamodbstreams")
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    sent = failures if failures is not None else []
    return ShardPoller(
        Settings(name="test", **settings), function, streams, arn, shard["ShardId"],
        Checkpoints(tmp_path / "positions.json"), lambda info, _: sent.append(info),
        "arn:aws:lambda:local:function:f",
    )  # fmt: skip


def drain(p):
    p.read()
    p.deliver_due(draining=True)


def test_batches_are_cut_at_the_batch_size_in_order(stack, table, tmp_path):
    put_scores(table[0], table[1], [f"p{n}" for n in range(7)])
    function = Scripted()
    drain(poller(stack, table, function, tmp_path, batch_size=3))
    assert function.players() == [["p0", "p1", "p2"], ["p3", "p4", "p5"], ["p6"]]


def test_the_batching_window_waits_for_more_records(stack, table, tmp_path):
    put_scores(table[0], table[1], ["a"])
    function = Scripted()
    p = poller(stack, table, function, tmp_path, batch_size=10, batching_window_s=0.5)
    p.read()
    p.deliver_due()
    assert function.events == []  # not full, window still open
    put_scores(table[0], table[1], ["b"])
    time.sleep(0.5)
    p.read()
    p.deliver_due()
    assert function.players() == [["a", "b"]]


def test_filters_drop_what_they_should_and_the_position_moves_past_it(stack, table, tmp_path):
    client, name, _ = table
    follow = {"FollowerId": "x", "CreatedAt": "2026-11-22T07:00:00.000Z", "Version": 1}
    put_scores(client, name, ["keep-1"])
    store.put(client, name, MODEL.entity("Follow"), follow | {"FolloweeId": "y"})
    put_scores(client, name, ["keep-2"])
    store.put(client, name, MODEL.entity("Follow"), follow | {"FolloweeId": "z"})
    function = Scripted()
    patterns = ({"dynamodb": {"NewImage": {"Entity": {"S": ["PlayerScore"]}}}},)
    p = poller(stack, table, function, tmp_path, patterns=patterns)
    drain(p)
    assert function.players() == [["keep-1", "keep-2"]]
    assert p.stats.filtered == 2
    last = p.reader.streams.get_records(
        ShardIterator=p.reader.streams.get_shard_iterator(
            StreamArn=p.stream_arn, ShardId=p.shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    )["Records"][-1]
    assert p.stats.position == last["dynamodb"]["SequenceNumber"]  # past the filtered tail too


def test_a_filtered_record_inside_a_delivered_batch_never_moves_the_position_back(stack, table, tmp_path):
    client, name, _ = table
    put_scores(client, name, ["keep-1"])
    store.put(client, name, MODEL.entity("Follow"), {"FollowerId": "x", "FolloweeId": "y", "Version": 1,
                                                      "CreatedAt": "2026-11-22T07:00:00.000Z"})  # fmt: skip
    put_scores(client, name, ["keep-2"])
    patterns = ({"dynamodb": {"NewImage": {"Entity": {"S": ["PlayerScore"]}}}},)
    function = Scripted()
    drain(poller(stack, table, function, tmp_path, patterns=patterns, batch_size=10))
    assert function.players() == [["keep-1", "keep-2"]]  # one batch, the follow between its records
    again = Scripted()
    drain(poller(stack, table, again, tmp_path, patterns=patterns, batch_size=10))  # a restart
    assert again.players() == []  # the saved position is keep-2's, not the follow's before it


def test_a_failing_record_is_retried_bisected_then_sent_to_the_failure_queue(stack, table, tmp_path):
    put_scores(table[0], table[1], ["ok-1", "bad", "ok-2", "ok-3"])

    def fail(event):
        players = [r["dynamodb"]["NewImage"]["PlayerId"]["S"] for r in event["Records"]]
        return FunctionError("ValueError", "poison") if "bad" in players else None

    function, sent = Scripted(fail), []
    p = poller(stack, table, function, tmp_path, sent, batch_size=10, bisect=True, max_retries=2)
    drain(p)
    delivered = [player for batch in function.players() if "bad" not in batch for player in batch]
    assert delivered == ["ok-1", "ok-2", "ok-3"]  # the rest went on, in order
    assert function.players().count(["bad"]) == 3  # the first try of the single record, then 2 retries
    (info,) = sent
    batch = info["DDBStreamBatchInfo"]
    assert (info["requestContext"]["condition"], info["requestContext"]["approximateInvokeCount"]) == (
        "RetryAttemptsExhausted", 3)  # fmt: skip
    assert batch["batchSize"] == 1 and batch["streamArn"] == p.stream_arn and "Records" not in info
    assert p.stats.sent_to_failure_queue == 1


def test_without_bisect_the_whole_batch_is_retried_then_dropped_to_the_queue(stack, table, tmp_path):
    put_scores(table[0], table[1], ["a", "b"])
    function, sent = Scripted(lambda e: FunctionError("Sandbox.Timedout", "Task timed out")), []
    drain(poller(stack, table, function, tmp_path, sent, batch_size=10, max_retries=1))
    assert function.players() == [["a", "b"], ["a", "b"]]
    assert sent[0]["DDBStreamBatchInfo"]["batchSize"] == 2


def test_a_partial_failure_resumes_at_the_lowest_failed_sequence_number(stack, table, tmp_path):
    put_scores(table[0], table[1], ["a", "b", "c", "d"])
    calls = []

    def fail(event):
        calls.append(1)
        if len(calls) == 1:  # the first invocation reports b and d as failed
            sequences = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
            return {"batchItemFailures": [{"itemIdentifier": sequences[3]}, {"itemIdentifier": sequences[1]}]}
        return None

    function = Scripted(fail)
    p = poller(stack, table, function, tmp_path, batch_size=10, report_failures=True, max_retries=3)
    drain(p)
    assert function.players() == [["a", "b", "c", "d"], ["b", "c", "d"]]


def test_records_older_than_the_maximum_age_skip_to_the_queue(stack, table, tmp_path, monkeypatch):
    put_scores(table[0], table[1], ["old"])
    function, sent = Scripted(), []
    p = poller(stack, table, function, tmp_path, sent, max_age_s=60)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 120)  # the record is now two minutes old
    drain(p)
    assert function.events == []
    assert sent[0]["requestContext"]["condition"] == "RecordAgeExceeded"  # as recorded against AWS
    assert sent[0]["requestContext"]["approximateInvokeCount"] == 1 and "responseContext" not in sent[0]


def test_tumbling_windows_carry_state_and_end_with_a_final_invocation(stack, table, tmp_path):
    put_scores(table[0], table[1], ["a", "b", "c"])

    def count(event):
        return {
            "state": {"seen": event["state"].get("seen", 0) + len(event["Records"])},
            "batchItemFailures": [],
        }

    function = Scripted(count)
    p = poller(stack, table, function, tmp_path, batch_size=2, tumbling_window_s=3600)
    drain(p)
    first, second = function.events
    assert first["state"] == {} and second["state"] == {"seen": 2}  # carried to the next invocation
    assert first["shardId"] == p.shard and first["window"]["start"].endswith(":00:00Z")
    assert not second["isFinalInvokeForWindow"]
    p.window = (p.window[0], time.time() - 1)  # the window's end has passed
    p.deliver_due()
    final = function.events[-1]
    assert final["isFinalInvokeForWindow"] and final["Records"] == [] and final["state"] == {"seen": 3}


def test_under_a_tumbling_window_a_response_without_state_is_a_failed_invocation(stack, table, tmp_path):
    """Lambda developer guide, services-ddb-windows: "If the response does not contain a state
    property, Lambda considers this a failed invocation." Retried, bisected, then the failure destination."""
    put_scores(table[0], table[1], ["a", "b"])
    function, sent = Scripted(lambda event: {"batchItemFailures": []}), []
    p = poller(stack, table, function, tmp_path, sent, batch_size=10, tumbling_window_s=3600, bisect=True,
               max_retries=1)  # fmt: skip
    drain(p)
    assert function.players() == [["a", "b"], ["a"], ["a"], ["b"], ["b"]]  # a split is not a retry
    assert [info["DDBStreamBatchInfo"]["batchSize"] for info in sent] == [1, 1]
    assert "no state object" in p.stats.last_error
    assert p.stats.delivered == 0


def test_a_failed_final_invocation_is_retried_and_the_shard_waits_for_it(stack, table, tmp_path):
    """services-ddb-windows: the final invocation is synchronous; "if the invocation fails, your
    Lambda function suspends further processing until a successful invocation." A final response
    without state fails too. Nothing of the next window is delivered meanwhile."""
    client, name, _ = table
    finals = []

    def answer(event):
        if not event["isFinalInvokeForWindow"]:
            return {"state": {"seen": len(event["Records"])}}
        finals.append(event["state"])
        if len(finals) == 1:
            return FunctionError("RuntimeError", "the final invocation failed")
        if len(finals) == 2:
            return {"batchItemFailures": []}  # no state: failed as well
        return {"state": {}}

    function = Scripted(answer)
    p = poller(stack, table, function, tmp_path, batch_size=10, tumbling_window_s=1)
    time.sleep(1.05 - time.time() % 1)  # a window's start: its put and delivery end before it closes
    put_scores(client, name, ["first-window"])
    drain(p)
    time.sleep(1.05 - time.time() % 1)  # into the next one-second window
    put_scores(client, name, ["next-window"])
    drain(p)  # the first window's final invocation fails: the shard waits
    assert function.players() == [["first-window"], []]
    assert "waits" in p.stats.blocked and p.stats.retries == 1
    assert p.read() == 0  # nothing more is read while it waits
    deadline = time.monotonic() + 10
    while len(function.events) < 5 and time.monotonic() < deadline:
        p.read()
        p.deliver_due()
        time.sleep(0.05)
    assert function.players() == [["first-window"], [], [], [], ["next-window"]]
    assert finals == [{"seen": 1}] * 3  # every retry of the final invocation carries the window's state
    assert p.stats.retries == 2 and p.stats.blocked == ""
    assert [event["isFinalInvokeForWindow"] for event in function.events] == [False, True, True, True, False]


def test_a_restart_resumes_from_the_saved_position(stack, table, tmp_path):
    put_scores(table[0], table[1], ["a", "b"])
    first = Scripted()
    drain(poller(stack, table, first, tmp_path))
    put_scores(table[0], table[1], ["c"])
    second = Scripted()
    drain(poller(stack, table, second, tmp_path))  # a new poller: what a restarted `up` builds
    assert first.players() == [["a", "b"]] and second.players() == [["c"]]


def test_stopping_delivers_what_was_read(stack, table, tmp_path):
    put_scores(table[0], table[1], ["a"])
    function = Scripted()
    p = poller(stack, table, function, tmp_path, batch_size=100, batching_window_s=3600)
    stop = threading.Event()
    runner = threading.Thread(target=p.run, args=(stop,))
    runner.start()
    time.sleep(0.5)
    assert function.events == []  # waiting for its window
    stop.set()
    runner.join(timeout=10)
    assert function.players() == [["a"]]


def test_a_lag_of_zero_counts_only_what_was_written_before_the_read_it_came_from(stack, table, tmp_path):
    """A poller's lag is measured when it reads: `read_through` says which writes it covers, so
    "caught up" waits for a read after the last write (a lag of 0 from before it is stale)."""
    function = Scripted()
    p = poller(stack, table, function, tmp_path, batch_size=100)
    put_scores(table[0], table[1], ["a"])
    drain(p)
    p.read()
    assert p.stats.lag_records == 0 and function.players() == [["a"]]
    written = time.time()
    put_scores(table[0], table[1], ["b"])
    assert p.stats.lag_records == 0 and p.read_through < written  # stale: b is not counted yet
    assert p.read() == 1 and p.stats.lag_records == 1 and p.read_through < written
    p.deliver_due(draining=True)
    assert p.read() == 0 and p.stats.lag_records == 0 and p.read_through >= written
    assert function.players() == [["a"], ["b"]]


def test_settings_come_from_the_mapping_properties():
    settings = Settings.from_properties("m", {
        "BatchSize": 7, "MaximumBatchingWindowInSeconds": 2, "StartingPosition": "LATEST",
        "FilterCriteria": {"Filters": [{"Pattern": '{"eventName":["INSERT"]}'}]}, "MaximumRetryAttempts": 4,
        "MaximumRecordAgeInSeconds": 60, "BisectBatchOnFunctionError": True, "TumblingWindowInSeconds": 30,
        "FunctionResponseTypes": ["ReportBatchItemFailures"], "ParallelizationFactor": 1,
    })  # fmt: skip
    assert settings == Settings("m", 7, 2.0, "LATEST", ({"eventName": ["INSERT"]},), 4, 60, True, True, 30, 1)


def test_ttl_deletes_expired_items_and_their_records_carry_the_services_identity(tmp_path):
    """DynamoDB Local deletes expired items itself (within about 10 s here; AWS within days), and
    the stream record of such a deletion names the DynamoDB service, as AWS's does (Streams API
    `Identity`: "For Time To Live, the principalId is dynamodb.amazonaws.com", type "Service"); the
    mapping delivers it as Lambda spells it, `{"type", "principalId"}`. The table has no GSIs:
    DynamoDB Local 1.25.1 never expires an item that is missing from any GSI of its table (see the
    README's Fidelity section). On a DynamoDB Local of its own: its TTL pass reads every table it
    holds, and the session's holds hundreds (over 100 s to come round on a busy CI)."""
    from hybridsync.local.dynamodb import server as dynamodb_local
    from hybridsync.runtime import aws

    endpoint, process = dynamodb_local.start()
    try:
        own = SimpleNamespace(client=lambda service="dynamodb": aws.client(service, endpoint))
        expiry_is_delivered_with_the_services_identity(own, tmp_path)
    finally:
        dynamodb_local.stop(process)


def expiry_is_delivered_with_the_services_identity(stack, tmp_path) -> None:
    from hybridsync.streams import filters
    from hybridsync.sync import writeback

    client, name = stack.client(), f"ttl-{uuid.uuid4().hex[:8]}"
    request = MODEL.table("main").create_request(name)
    request.pop("GlobalSecondaryIndexes")
    request["AttributeDefinitions"] = [
        a for a in request["AttributeDefinitions"] if a["AttributeName"] in "PK SK"
    ]
    client.create_table(**request)
    ttl = {"Enabled": True, "AttributeName": "ExpiresAt"}
    client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    table = (client, name, client.describe_table(TableName=name)["Table"]["LatestStreamArn"])
    order = {"OrderId": "o-ttl", "CustomerId": "c-1", "CreatedAt": "2026-11-22T07:00:00.000Z",
             "Status": "OPEN", "Total": Decimal("1"), "Version": 1}  # fmt: skip
    orders, now = MODEL.entity("Order"), int(time.time())
    store.put(client, name, orders, order | {"ExpiresAt": now - 5})
    store.put(client, name, orders, order | {"OrderId": "o-live", "ExpiresAt": now + 600})
    store.put(client, name, orders, order | {"OrderId": "o-user"})
    store.delete(client, name, orders, order | {"OrderId": "o-user"}, 1)
    function = Scripted()
    p = poller(stack, table, function, tmp_path)
    deadline = time.monotonic() + 150  # DynamoDB Local's own TTL pass: ~10 s
    removes: dict[str, dict] = {}
    while len(removes) < 2 and time.monotonic() < deadline:
        drain(p)
        removes = {r["dynamodb"]["OldImage"]["OrderId"]["S"]: r for e in function.events for r in e["Records"]
                   if r["eventName"] == "REMOVE"}  # fmt: skip
        time.sleep(0.5)
    assert set(removes) == {"o-ttl", "o-user"}  # only the expired one went; the live one stays
    assert removes["o-ttl"]["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert "userIdentity" not in removes["o-user"]
    assert not filters.admits(writeback.event_filters(MODEL), removes["o-ttl"])  # TTL: not written back
    assert filters.admits(writeback.event_filters(MODEL), removes["o-user"])


def test_the_mappings_of_one_shard_share_one_reader(stack, table, tmp_path):
    from hybridsync.local.dynamodb.streams import ShardReader

    put_scores(table[0], table[1], ["a", "b", "c"])
    streams = stack.client("dynamodbstreams")
    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(streams, name)

        def get_records(self, **kwargs):
            calls.append(1)
            return streams.get_records(**kwargs)

    (shard,) = streams.describe_stream(StreamArn=table[2])["StreamDescription"]["Shards"]
    reader = ShardReader(Counting(), table[2], shard["ShardId"])
    everything, only_b = Scripted(), Scripted()
    pollers = [
        ShardPoller(Settings("all"), everything, reader, table[2], shard["ShardId"], Checkpoints(None)),
        ShardPoller(Settings("b", patterns=({"dynamodb": {"NewImage": {"PlayerId": {"S": ["b"]}}}},)), only_b,
                    reader, table[2], shard["ShardId"], Checkpoints(None)),
    ]  # fmt: skip
    for p in pollers:
        drain(p)
    assert (everything.players(), only_b.players()) == ([["a", "b", "c"]], [["b"]])
    assert len(calls) == 1  # fetched once, for both


@pytest.mark.parametrize("start", ["LATEST", "TRIM_HORIZON"])
def test_a_reader_that_starts_on_an_empty_shard_reads_what_comes_later(stack, table, start):
    """DynamoDB Local refuses, once records arrive, the iterator it gave for a shard that held none
    (TrimmedDataAccessException) whenever another table has records; the readers start again at
    TRIM_HORIZON (hybridsync.local.dynamodb.streams.ShardCursor) and miss nothing."""
    from hybridsync.local.dynamodb.streams import StreamReader

    client, name, arn = table
    other = f"esm-{uuid.uuid4().hex[:8]}"
    client.create_table(**MODEL.table("main").create_request(other))
    put_scores(client, other, ["elsewhere"])
    reader = StreamReader(stack.client("dynamodbstreams"), arn, start=start)
    assert reader.read() == []
    put_scores(client, name, ["later-1", "later-2"])
    assert [r["dynamodb"]["NewImage"]["PlayerId"]["S"] for r in reader.read()] == ["later-1", "later-2"]
