"""The local alarm evaluation (hybridsync/local/alarms.py), as CloudWatch documents it ("Evaluating an
alarm", "Configuring how CloudWatch alarms treat missing data"), on a clock of its own."""

import json

import pytest

from hybridsync.local.alarms import Alarm, Alarms, Metrics, statistic

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
