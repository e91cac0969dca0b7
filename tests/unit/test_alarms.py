"""The local alarm evaluation (hybridsync/local/cloudwatch/alarms.py), as CloudWatch documents it
("Evaluating an alarm", "Configuring how CloudWatch alarms treat missing data"), on a clock of its own."""

import argparse
import json
import time

import pytest

from hybridsync.local.cloudwatch.alarms import (
    KEY_REFUSED,
    Alarm,
    Alarms,
    Metrics,
    Topic,
    percentiles_s,
    statistic,
)

pytestmark = pytest.mark.unit
T0 = 1_800_000_000.0  # a period boundary for periods of 10 s


def alarm(**overrides) -> Alarm:
    properties = {
        "EvaluationPeriods": 1,
        "Threshold": 0,
        "ComparisonOperator": "GreaterThanThreshold",
        "MetricName": "DeadLetters",
        "Namespace": "hybridsync",
        "Statistic": "Sum",
        "Period": 10,
        "Dimensions": [{"Name": "service", "Value": "hybridsync-write_back"}],
        "TreatMissingData": "notBreaching",
        "AlarmActions": ["arn:topic"],
        "OKActions": ["arn:topic"],
        "AlarmDescription": "dead-lettered: redrive",
    } | overrides
    return Alarm.from_properties("a", properties)


def evaluator(*alarms: Alarm, tmp_path) -> tuple[Alarms, Metrics]:
    metrics = Metrics()
    found = Alarms(list(alarms), metrics, tmp_path, region="us-east-1", account="123456789012")
    found.started = T0
    return found, metrics


def test_statistics():
    values = [float(v) for v in range(1, 101)]
    assert (statistic(values, "Sum"), statistic(values, "Maximum"), statistic(values, "Average")) == (
        5050,
        100,
        50.5,
    )
    assert (statistic(values, "p99"), statistic(values, "p50"), statistic(values, "SampleCount")) == (
        99,
        50,
        100,
    )


def test_a_breach_alarms_once_its_period_is_complete_and_clears_after(tmp_path):
    dead = alarm()
    alarms, metrics = evaluator(dead, tmp_path=tmp_path)
    metrics.put("hybridsync", "DeadLetters", {"service": "hybridsync-write_back"}, 1, at=T0 + 3)
    assert alarms.evaluate(T0 + 5) == [dead] and dead.state == "OK"  # nothing complete yet: not breaching
    alarms.evaluate(T0 + 11)
    assert dead.state == "ALARM" and dead.reason.startswith("Threshold Crossed: 1 datapoint(s) [1]")
    alarms.evaluate(T0 + 21)  # a complete period without data: not breaching
    assert dead.state == "OK"
    messages = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    told = [json.loads(m["Message"]) for m in messages]
    assert [t["NewStateValue"] for t in told] == ["OK", "ALARM", "OK"]
    assert told[1]["OldStateValue"] == "OK" and told[1]["Trigger"]["MetricName"] == "DeadLetters"
    assert messages[1]["Subject"] == 'ALARM: "a" in us-east-1' and messages[1]["TopicArn"] == "arn:topic"


def test_missing_data_rules(tmp_path):
    breaching, missing, ignore = (alarm(TreatMissingData=rule) for rule in ("breaching", "missing", "ignore"))
    alarms, _ = evaluator(breaching, missing, ignore, tmp_path=tmp_path)
    alarms.evaluate(T0 + 11)
    assert (breaching.state, missing.state, ignore.state) == (
        "ALARM",
        "INSUFFICIENT_DATA",
        "INSUFFICIENT_DATA",
    )
    assert not list(tmp_path.glob("*-a-INSUFFICIENT_DATA.json"))  # no action for that state


def test_datapoints_to_alarm_of_evaluation_periods(tmp_path):
    lag = alarm(
        MetricName="IteratorAge",
        Namespace="AWS/Lambda",
        Statistic="Maximum",
        Threshold=300_000,
        EvaluationPeriods=3,
        DatapointsToAlarm=2,
        Dimensions=[{"Name": "FunctionName", "Value": "W"}],
    )
    alarms, metrics = evaluator(lag, tmp_path=tmp_path)
    for at, age in ((T0 + 1, 400_000), (T0 + 11, 100), (T0 + 21, 500_000)):
        metrics.put("AWS/Lambda", "IteratorAge", {"FunctionName": "W"}, age, at=at)
    alarms.evaluate(T0 + 29)  # two complete periods: one breach of the two needed
    assert lag.state == "OK"
    alarms.evaluate(T0 + 31)
    assert lag.state == "ALARM"


def test_replication_latency_is_measured_beside_the_twin_only(tmp_path):
    """DynamoDB's ReplicationLatency has a local source only under `up --regions` (the twin's
    deliveries: CloudWatch.measure_replication); without it the alarm says it is not evaluated."""
    dimensions = [{"Name": "TableName", "Value": "t"}, {"Name": "ReceivingRegion", "Value": "us-west-2"}]
    late = alarm(Namespace="AWS/DynamoDB", MetricName="ReplicationLatency", Statistic="Average",
                 Threshold=60_000, Dimensions=dimensions)  # fmt: skip
    alarms, metrics = evaluator(late, tmp_path=tmp_path)
    metrics.put("AWS/DynamoDB", "ReplicationLatency", {"TableName": "t", "ReceivingRegion": "us-west-2"},
                90_000, T0 + 2)  # fmt: skip
    alarms.evaluate(T0 + 12)
    assert late.state == "INSUFFICIENT_DATA" and "no local source" in late.reason
    alarms.sources |= {"AWS/DynamoDB": {"ReplicationLatency"}}
    alarms.evaluate(T0 + 12)
    assert late.state == "ALARM" and "[90000]" in late.reason


def test_unmeasured_alarms_say_so_and_emf_lines_are_read(tmp_path):
    throttles = alarm(Namespace="AWS/DynamoDB", MetricName="WriteThrottleEvents")
    dead = alarm()
    alarms, metrics = evaluator(throttles, dead, tmp_path=tmp_path)
    line = json.dumps(
        {
            "_aws": {
                "Timestamp": int((T0 + 2) * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": "hybridsync",
                        "Dimensions": [["service"]],
                        "Metrics": [{"Name": "DeadLetters", "Unit": "Count"}],
                    }
                ],
            },
            "service": "hybridsync-write_back",
            "DeadLetters": [2.0],
        }
    )
    log = tmp_path / "WriteBack.log"
    log.write_text("not json\n" + line + "\n" + '{"_aws": "half a line')
    metrics.tail(log)
    alarms.evaluate(T0 + 12)
    assert throttles.state == "INSUFFICIENT_DATA" and "no local source" in throttles.reason
    assert dead.state == "ALARM" and "[2]" in dead.reason
    with log.open("a") as more:
        more.write('"}\n')
    metrics.tail(log)  # the rest of the half line: not EMF after all, dropped


# --- publishing through the topic's policies, and the alarm's history ----------------------------

ACCOUNT = "123456789012"
TOPIC = f"arn:aws:sns:us-east-1:{ACCOUNT}:hybridsync-AlarmTopic"
KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1111"
TLS_ONLY = [{"Sid": "AllowPublishThroughSSLOnly", "Effect": "Deny", "Principal": "*", "Action": "sns:Publish",
             "Resource": TOPIC, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]  # fmt: skip
CLOUDWATCH_MAY = [*TLS_ONLY, {"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                              "Action": "sns:Publish", "Resource": TOPIC,
                              "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}}}]  # fmt: skip
KEY_FOR_CLOUDWATCH = [
    {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*",
     "Resource": "*"},
    {"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
     "Action": ["kms:Decrypt", "kms:GenerateDataKey*"], "Resource": "*"},
]  # fmt: skip


def fired(topic: Topic, tmp_path) -> tuple[Alarm, list]:
    """An alarm breached once with `topic` as its action: the alarm, and the notifications written."""
    dead = alarm(AlarmActions=[TOPIC], OKActions=[TOPIC])
    metrics = Metrics()
    alarms = Alarms([dead], metrics, tmp_path, region="us-east-1", account=ACCOUNT, topics={TOPIC: topic})
    alarms.started = T0
    metrics.put("hybridsync", "DeadLetters", {"service": "hybridsync-write_back"}, 1, at=T0 + 3)
    alarms.evaluate(T0 + 11)
    assert dead.state == "ALARM"
    return dead, [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*-a-ALARM.json"))]


def actions(dead: Alarm) -> list[dict]:
    return [i for i in dead.history if i["HistoryItemType"] == "Action"]


def test_a_topic_policy_with_only_the_tls_deny_refuses_cloudwatch_as_aws_records_it(tmp_path):
    """CDK's enforce_ssl policy replaces SNS's default one and allows nothing: no notification, and
    the history AWS shows (knowledge center "cloudwatch-receive-sns-for-alarm-trigger";
    aws-solutions/automated-security-response-on-aws#43)."""
    dead, written = fired(Topic(TOPIC, TLS_ONLY), tmp_path)
    assert written == []
    (failed,) = actions(dead)
    arn = f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:a"
    error = (f"Resource: {arn} is not authorized to perform: SNS:Publish on resource: {TOPIC} because no "
             "resource-based policy allows the SNS:Publish action")  # fmt: skip
    assert f'Failed to execute action {TOPIC}. Received error: "{error}"'.startswith(failed["HistorySummary"])
    assert len(failed["HistorySummary"]) <= 255  # the API's limit: the whole error is in HistoryData
    assert json.loads(failed["HistoryData"])["error"] == error
    assert json.loads(failed["HistoryData"])["actionState"] == "Failed"


def test_cloudwatch_publishes_where_the_topic_policy_or_the_default_policy_lets_it(tmp_path):
    for policy in (CLOUDWATCH_MAY, None):  # None: no topic policy, SNS's default one (its own account)
        folder = tmp_path / str(policy is None)
        dead, written = fired(Topic(TOPIC, policy), folder)
        assert len(written) == 1 and written[0]["TopicArn"] == TOPIC
        assert [i["HistorySummary"] for i in actions(dead)] == [f"Successfully executed action {TOPIC}"]
    other_account = [
        {**CLOUDWATCH_MAY[1], "Condition": {"StringEquals": {"aws:SourceAccount": "999999999999"}}}
    ]
    assert fired(Topic(TOPIC, other_account), tmp_path / "other")[1] == []


def test_an_encrypted_topic_needs_a_key_whose_policy_lets_cloudwatch_use_it(tmp_path):
    """AWS knowledge center "cloudwatch-configure-alarm-sns": never the AWS-managed key; a customer key
    whose policy lets cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey*."""
    refused = f'Received error: "{KEY_REFUSED}"'
    assert (
        KEY_REFUSED == "CloudWatch Alarms does not have authorization to access the SNS topic encryption key."
    )
    cases = {
        "managed": Topic(TOPIC, CLOUDWATCH_MAY, "alias/aws/sns"),
        "imported": Topic(TOPIC, CLOUDWATCH_MAY, KEY, None),  # its policy is not in the templates
        "root only": Topic(TOPIC, CLOUDWATCH_MAY, KEY, KEY_FOR_CLOUDWATCH[:1]),
    }
    for name, topic in cases.items():
        dead, written = fired(topic, tmp_path / name)
        assert written == [] and actions(dead)[0]["HistorySummary"].endswith(refused), name
    dead, written = fired(Topic(TOPIC, CLOUDWATCH_MAY, KEY, KEY_FOR_CLOUDWATCH), tmp_path / "customer")
    assert len(written) == 1


def test_set_state_runs_the_actions_and_the_next_evaluation_brings_the_alarm_back(tmp_path):
    """SetAlarmState, as `hybridsync doctor` drives its canary: ALARM now (its action runs), OK at the
    next evaluation (its OK action runs); the history, newest first, shows both."""
    canary = alarm(MetricName="DoctorCanary", Dimensions=[], AlarmActions=[TOPIC], OKActions=[TOPIC])
    alarms = Alarms([canary], Metrics(), tmp_path, region="us-east-1", account=ACCOUNT,
                    topics={TOPIC: Topic(TOPIC, CLOUDWATCH_MAY)})  # fmt: skip
    alarms.started = T0
    alarms.evaluate(T0 + 11)
    assert canary.state == "OK"
    alarms.set_state(canary.name, "ALARM", "doctor: canary", now=T0 + 12)
    assert canary.state == "ALARM" and canary.reason == "doctor: canary"
    alarms.evaluate(T0 + 13)
    assert canary.state == "OK"
    summaries = [i["HistorySummary"] for i in alarms.history(canary.name)]
    published = f"Successfully executed action {TOPIC}"
    assert summaries[:4] == [
        published,
        "Alarm updated from ALARM to OK",
        published,
        "Alarm updated from OK to ALARM",
    ]
    assert summaries[-1] == 'Alarm "a" created'
    latest = alarms.history(canary.name, "StateUpdate")[0]
    assert latest["HistorySummary"] == "Alarm updated from ALARM to OK"
    told = [
        json.loads(json.loads(p.read_text())["Message"])["NewStateValue"]
        for p in sorted(tmp_path.glob("*.json"))
    ]
    assert told[-2:] == ["ALARM", "OK"]
    with pytest.raises(ValueError):
        alarms.set_state(canary.name, "BROKEN", "")
    with pytest.raises(KeyError):
        alarms.set_state("no-such-alarm", "ALARM", "")
    assert (
        alarms.status()[canary.name]["history"][0]["HistorySummary"]
        == f"Successfully executed action {TOPIC}"
    )


# --- freshness: a percentile alarm on an EMF metric, and what `hybridsync status` shows -----------


def freshness_line(at: float, *values_ms: float, service: str = "hybridsync-write_back") -> str:
    """An EMF line as Powertools Metrics writes it: `Freshness` in Milliseconds, its `service`."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": int(at * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": "hybridsync",
                        "Dimensions": [["service"]],
                        "Metrics": [{"Name": "Freshness", "Unit": "Milliseconds"}],
                    }
                ],
            },
            "service": service,
            "Freshness": list(values_ms),
        }
    )


def freshness_alarm() -> Alarm:
    """WriteBackFreshnessP99 as CDK renders `statistic="p99"`: an ExtendedStatistic (no Statistic),
    5 s in ms."""
    return alarm(
        MetricName="Freshness",
        Statistic=None,
        ExtendedStatistic="p99",
        Threshold=5000,
        AlarmDescription="write_back: the slowest 1% ...",
    )


def test_a_p99_freshness_alarm_fires_on_its_slowest_percent_and_no_traffic_is_not_stale(tmp_path):
    """The p99 of the period's values (nearest rank), read from the function's EMF lines: 99 fresh
    batches and one slow one stay under it, two slow ones of 100 pass it; a period without a batch is
    not breaching."""
    fresh = freshness_alarm()
    alarms, metrics = evaluator(fresh, tmp_path=tmp_path)
    log = tmp_path / "WriteBack.log"
    log.write_text(freshness_line(T0 + 1, *[800.0] * 99, 9000.0) + "\n")
    metrics.tail(log)
    alarms.evaluate(T0 + 11)
    assert fresh.state == "OK" and "[800]" in fresh.reason
    with log.open("a") as more:
        more.write(freshness_line(T0 + 12, *[800.0] * 98, 9000.0, 9500.0) + "\n")
    metrics.tail(log)
    alarms.evaluate(T0 + 21)
    assert fresh.state == "ALARM" and fresh.reason.startswith("Threshold Crossed: 1 datapoint(s) [9000]")
    assert "(p99, 10 s)" in fresh.reason
    alarms.evaluate(T0 + 31)  # no batch in the period: no traffic, not stale
    assert fresh.state == "OK"


def test_percentiles_in_seconds_of_values_in_milliseconds():
    assert percentiles_s([float(v) for v in range(1, 101)]) == {"p50_s": 0.05, "p99_s": 0.099, "count": 100}
    assert percentiles_s([1234.0]) == {"p50_s": 1.234, "p99_s": 1.234, "count": 1}
    assert percentiles_s([]) == {"p50_s": None, "p99_s": None, "count": 0}


def test_status_shows_each_directions_freshness_of_the_last_five_minutes(tmp_path, capsys):
    """What `hybridsync status` prints and `--json` holds, from the values the functions' EMF lines
    put in the metrics: only the last 5 minutes', per direction, a direction without a batch shown so."""
    from hybridsync.cli.local import _status

    metrics, now = Metrics(), time.time()
    log = tmp_path / "logs.log"
    log.write_text(
        "\n".join(
            [
                freshness_line(now - 600, 60_000.0),  # older than 5 minutes: not counted
                freshness_line(now - 30, 400.0, 600.0, 2500.0),
                freshness_line(now - 20, 1500.0, service="hybridsync-sql_sync"),
            ]
        )
        + "\n"
    )
    metrics.tail(log)
    since = now - 300
    services = {"write_back": "hybridsync-write_back", "aggregate": "hybridsync-aggregate",
                "sql_sync": "hybridsync-sql_sync"}  # fmt: skip
    freshness = {
        d: percentiles_s(metrics.values("hybridsync", "Freshness", {"service": s}, since))
        for d, s in services.items()
    }
    assert freshness == {
        "write_back": {"p50_s": 0.6, "p99_s": 2.5, "count": 3},
        "aggregate": {"p50_s": None, "p99_s": None, "count": 0},
        "sql_sync": {"p50_s": 1.5, "p99_s": 1.5, "count": 1},
    }
    status = {"at": now, "mappings": {}, "functions": {}, "failure_queues": {}, "alarms": {},
              "freshness": freshness}  # fmt: skip
    (tmp_path / "status.json").write_text(json.dumps(status))
    assert _status(argparse.Namespace(state_dir=str(tmp_path), json=False)) == 0
    shown = capsys.readouterr().out
    assert "freshness, last 5 minutes" in shown
    lines = [line for line in shown.splitlines() if "->" in line]  # a direction's
    rows = {line.split("(")[1].split(")")[0]: line.split()[-3:] for line in lines}
    assert rows == {"write_back": ["0.600", "2.500", "3"], "aggregate": ["-", "-", "0"],
                    "sql_sync": ["1.500", "1.500", "1"]}  # fmt: skip
    assert _status(argparse.Namespace(state_dir=str(tmp_path), json=True)) == 0
    assert json.loads(capsys.readouterr().out)["freshness"] == freshness
