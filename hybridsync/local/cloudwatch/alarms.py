"""CloudWatch, locally: the metrics the app really emits, and the synthesized alarms evaluated on them.

Metrics come from where AWS takes them: the functions' Powertools EMF lines in their logs (namespace
`hybridsync`), Lambda's own per-function metrics as the local runtime counts them (Invocations,
Errors, Throttles, Duration, IteratorAge, DeadLetterErrors, DestinationDeliveryFailures) and the
mappings' event counts (MetricsConfig EventCount), the queues' depth, and the HTTP API's requests,
5xx and latency, and under `hybridsync up --regions` DynamoDB's `ReplicationLatency` as the
global tables' twin measures it. A metric with no local source (DynamoDB's throttles, RDS Proxy,
Aurora) leaves its alarm in INSUFFICIENT_DATA, saying so.

An alarm is evaluated as CloudWatch documents it ("Evaluating an alarm"): its statistic over each of
the last `EvaluationPeriods` complete periods (aligned to the clock), ALARM when `DatapointsToAlarm`
of them breach, a period without data treated by `TreatMissingData` (missing: INSUFFICIENT_DATA when
all are missing; ignore: the state stays); periods before the alarm existed never count.
`period_s` shortens every alarm's period alike (`hybridsync up --alarm-period`), to see a 5-minute
alarm go and come back in seconds. Each change of state with an action for the new state is what
the topic's subscribers receive (CloudWatch's alarm message, in SNS's envelope): one JSON file in
`notifications/`, when CloudWatch may publish to the topic (`refusal`): the topic's policy must let
the service principal cloudwatch.amazonaws.com `sns:Publish` (with no policy, SNS's default one lets
its own account), and an encrypted topic's key policy must let it use the key. A refused publish
writes nothing and reads in the alarm's history as AWS writes it ("Failed to execute action ...").

Each alarm keeps its history as DescribeAlarmHistory returns it (ConfigurationUpdate, StateUpdate and
Action items, newest first; the last HISTORY_KEPT), and `set_state` is SetAlarmState: the state now,
its actions run as for any change, and the next evaluation brings the alarm back.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hybridsync.local.iam import policies as iam

STATES = ("OK", "ALARM", "INSUFFICIENT_DATA")
HISTORY_KEPT = 100  # items per alarm (CloudWatch keeps 30 days of them)
SUMMARY_MAX = 255  # AlarmHistoryItem's HistorySummary: at most 255 characters (the API reference)
CLOUDWATCH = "cloudwatch.amazonaws.com"  # the principal CloudWatch alarms publish as
# "CloudWatch Alarms does not have authorization to access the SNS topic encryption key." is the
# history AWS shows for a key CloudWatch may not use (AWS knowledge center, cloudwatch-configure-alarm-sns)
KEY_REFUSED = "CloudWatch Alarms does not have authorization to access the SNS topic encryption key."
# what the local app measures, by namespace (None: every metric of it)
LOCAL_SOURCES: dict[str, set[str] | None] = {
    "hybridsync": None,
    "AWS/Lambda": {
        "Invocations",
        "Errors",
        "Throttles",
        "Duration",
        "IteratorAge",
        "DeadLetterErrors",
        "DestinationDeliveryFailures",
        "PolledEventCount",
        "FilteredOutEventCount",
        "InvokedEventCount",
        "OnFailureDestinationDeliveredEventCount",
    },
    "AWS/SQS": {"ApproximateNumberOfMessagesVisible"},
    "AWS/ApiGateway": {"Count", "4xx", "5xx", "Latency"},
}
KEEP_S = 3600  # datapoints older than this are dropped
PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)")


class Metrics:
    """Datapoints by (namespace, metric, dimensions), as PutMetricData stores them."""

    def __init__(self) -> None:
        self._points: dict[tuple[str, str, frozenset], deque[tuple[float, float]]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._offsets: dict[Path, int] = {}

    def put(
        self, namespace: str, name: str, dimensions: dict[str, str], value: float, at: float | None = None
    ) -> None:
        now = time.time()
        with self._lock:
            points = self._points[(namespace, name, frozenset(dimensions.items()))]
            points.append((at if at is not None else now, float(value)))
            while points and points[0][0] < now - KEEP_S:
                points.popleft()

    def values(
        self, namespace: str, name: str, dimensions: dict[str, str], start: float, end: float = math.inf
    ) -> list[float]:
        """A metric's values from `start` (on: since then) to `end`, oldest first."""
        with self._lock:
            points = list(self._points.get((namespace, name, frozenset(dimensions.items())), ()))
        return [v for t, v in points if start <= t < end]

    def total(self, name: str) -> float:
        """A metric's sum over the last hour, whatever its namespace and dimensions."""
        with self._lock:
            return sum(
                v for (_, metric, _), points in self._points.items() if metric == name for _, v in points
            )

    def emf(self, line: str) -> None:
        """One log line: an embedded-metric-format document's metrics, else nothing."""
        if not line.startswith("{") or '"_aws"' not in line:
            return
        try:
            document = json.loads(line)
            meta = document["_aws"]
            at = float(meta["Timestamp"]) / 1000
            for directive in meta["CloudWatchMetrics"]:
                for names in directive.get("Dimensions") or [[]]:
                    dimensions = {n: str(document[n]) for n in names}
                    for metric in directive["Metrics"]:
                        value = document[metric["Name"]]
                        for v in value if isinstance(value, list) else [value]:
                            self.put(directive["Namespace"], metric["Name"], dimensions, float(v), at)
        except (ValueError, KeyError, TypeError):
            return  # not EMF after all: CloudWatch drops it too

    def skip(self, path: Path) -> None:
        """Start reading a log at its end."""
        self._offsets[path] = path.stat().st_size if path.is_file() else 0

    def tail(self, path: Path) -> None:
        """Read what a function's log gained since the last call (its EMF lines)."""
        try:
            with path.open("rb") as log:
                log.seek(self._offsets.get(path, 0))
                data = log.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._offsets[path] = self._offsets.get(path, 0) + len(complete)
        for line in complete.decode(errors="replace").splitlines():
            self.emf(line)


def statistic(values: list[float], name: str) -> float:
    if name == "Sum":
        return sum(values)
    if name == "Average":
        return sum(values) / len(values)
    if name == "Maximum":
        return max(values)
    if name == "Minimum":
        return min(values)
    if name == "SampleCount":
        return float(len(values))
    if found := PERCENTILE.fullmatch(name):
        # pNN: the value NN% of the period's values are at or below (nearest rank), CloudWatch's
        # percentile over the raw values of an EMF metric; CloudWatch guide, "Percentiles":
        # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_concepts.html#Percentiles
        ordered = sorted(values)
        return ordered[max(0, math.ceil(float(found[1]) / 100 * len(ordered)) - 1)]
    raise ValueError(f"statistic {name!r} is not evaluated locally")


def percentiles_s(values_ms: list[float]) -> dict[str, Any]:
    """p50 and p99 in seconds (as the alarms evaluate them) and the count of a metric's values in
    milliseconds; no values: the percentiles are None."""
    if not values_ms:
        return {"p50_s": None, "p99_s": None, "count": 0}
    p50, p99 = (round(statistic(values_ms, p) / 1000, 3) for p in ("p50", "p99"))
    return {"p50_s": p50, "p99_s": p99, "count": len(values_ms)}


BREACHES = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


@dataclass(frozen=True)
class Topic:
    """An alarm action's SNS topic as the templates make it: the statements of its topic policy
    (None: no AWS::SNS::TopicPolicy, so SNS's default policy), its key (KmsMasterKeyId; None:
    unencrypted) and that key's policy when the templates hold the key (an AWS::KMS::Key)."""

    arn: str
    policy: list[dict[str, Any]] | None = None
    key: str | None = None
    key_policy: list[dict[str, Any]] | None = None


def default_policy(topic_arn: str, account: str) -> list[dict[str, Any]]:
    """SNS's default topic policy, which a topic has until a topic policy replaces it: every
    principal acting for the owner account (`AWS:SourceOwner`), CloudWatch's alarms of that account
    included (airbnb/binaryalert#169 shows it; DataBiosphere/azul#5651: without it, no alarm posted)."""
    actions = ["GetTopicAttributes", "SetTopicAttributes", "AddPermission", "RemovePermission",
               "DeleteTopic", "Subscribe", "ListSubscriptionsByTopic", "Publish", "Receive"]  # fmt: skip
    return [{"Sid": "__default_statement_ID", "Effect": "Allow", "Principal": {"AWS": "*"},
             "Action": [f"SNS:{a}" for a in actions], "Resource": topic_arn,
             "Condition": {"StringEquals": {"AWS:SourceOwner": account}}}]  # fmt: skip


def aws_managed(key: str) -> bool:
    """`alias/aws/sns` and the like, by alias or alias ARN: keys whose policy nobody can edit."""
    return key.startswith("alias/aws/") or ":alias/aws/" in key


def refusal(topic: Topic | None, topic_arn: str, alarm_arn: str, account: str) -> tuple[str, str] | None:
    """Why CloudWatch may not publish the alarm's notification to the topic: (the error AWS's
    alarm history shows, the local app's note on why), or None when it may. AWS knowledge center,
    "cloudwatch-receive-sns-for-alarm-trigger": the topic policy must allow the service principal
    cloudwatch.amazonaws.com sns:Publish (a topic policy replaces the default one; conditions on
    aws:SourceAccount / aws:SourceArn name the alarm's account and ARN); "cloudwatch-configure-alarm-sns":
    an encrypted topic needs a customer-managed key whose policy lets CloudWatch kms:Decrypt and
    kms:GenerateDataKey*; with the AWS-managed key alias/aws/sns it never can."""
    context = {"aws:SourceAccount": account, "aws:SourceOwner": account, "aws:SourceArn": alarm_arn,
               "aws:SecureTransport": "true", "aws:PrincipalServiceName": CLOUDWATCH}  # fmt: skip
    denied = f"Resource: {alarm_arn} is not authorized to perform: SNS:Publish on resource: {topic_arn}"
    if topic is None:
        return f"{denied} because no resource-based policy allows the SNS:Publish action", (
            "the topic is not one of the templates': no policy of it allows CloudWatch here"
        )
    policy = topic.policy if topic.policy is not None else default_policy(topic.arn, account)
    allowed, why = iam.resource_allows(policy, CLOUDWATCH, "sns:Publish", topic.arn, context)
    if not allowed:
        suffix = ("with an explicit deny in a resource-based policy" if why == "explicit deny"
                  else "because no resource-based policy allows the SNS:Publish action")  # fmt: skip
        return f"{denied} {suffix}", "the topic policy does not allow cloudwatch.amazonaws.com sns:Publish"
    if not topic.key:
        return None
    if aws_managed(topic.key):
        return KEY_REFUSED, f"{topic.key} is AWS-managed: its policy cannot let CloudWatch use it"
    if topic.key_policy is None:
        return KEY_REFUSED, (
            f"the policy of the key {topic.key} is not in the templates, so CloudWatch's use of it "
            "cannot be shown; refused, as AWS refuses unless that policy lets cloudwatch.amazonaws.com "
            "kms:Decrypt and kms:GenerateDataKey*"
        )
    key_context = context | {"kms:EncryptionContext:aws:sns:topicArn": topic.arn}
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        if not iam.resource_allows(topic.key_policy, CLOUDWATCH, action, topic.key, key_context)[0]:
            return KEY_REFUSED, f"the policy of the key {topic.key} does not let CloudWatch {action}"
    return None


def _iso(at: float) -> str:
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass
class Alarm:
    name: str
    description: str
    namespace: str
    metric: str
    dimensions: dict[str, str]
    statistic: str
    period_s: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    missing: str
    actions: dict[str, list[str]]  # state -> the topics it notifies
    state: str = "INSUFFICIENT_DATA"
    reason: str = "Unchecked: Initial alarm creation"
    since: float = field(default_factory=time.time)
    history: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=HISTORY_KEPT), repr=False, compare=False
    )

    def record(self, at: float, kind: str, summary: str, data: dict[str, Any]) -> None:
        """One AlarmHistoryItem (the API reference's fields; HistoryData a JSON string)."""
        self.history.append({"AlarmName": self.name, "AlarmType": "MetricAlarm", "Timestamp": _iso(at),
                             "HistoryItemType": kind, "HistorySummary": summary[:SUMMARY_MAX],
                             "HistoryData": json.dumps(data)})  # fmt: skip

    @classmethod
    def from_properties(cls, name: str, p: dict[str, Any]) -> Alarm:
        """An AWS::CloudWatch::Alarm's resolved properties (one metric; a metric-math alarm is kept
        but not evaluated locally: `metric` is empty)."""
        periods = int(p["EvaluationPeriods"])
        return cls(
            name=name,
            description=p.get("AlarmDescription", ""),
            namespace=p.get("Namespace", ""),
            metric=p.get("MetricName", ""),
            dimensions={d["Name"]: str(d["Value"]) for d in p.get("Dimensions", [])},
            statistic=p.get("Statistic") or p.get("ExtendedStatistic", ""),
            period_s=int(p.get("Period", 60)),
            evaluation_periods=periods,
            datapoints_to_alarm=int(p.get("DatapointsToAlarm", periods)),
            threshold=float(p["Threshold"]),
            comparison=p["ComparisonOperator"],
            missing=p.get("TreatMissingData", "missing"),
            actions={
                "ALARM": list(p.get("AlarmActions", [])),
                "OK": list(p.get("OKActions", [])),
                "INSUFFICIENT_DATA": list(p.get("InsufficientDataActions", [])),
            },
        )

    def measured(self, own: frozenset[str] = frozenset(),
                 sources: dict[str, set[str] | None] = LOCAL_SOURCES) -> bool:  # fmt: skip
        """Whether the local app measures its metric (`own`: the namespaces the functions' EMF uses;
        `sources`: what else it measures, by namespace)."""
        if not self.metric:
            return False
        names = None if self.namespace in own else sources.get(self.namespace, set())
        return names is None or self.metric in names


class Alarms:
    """The app's alarms over its metrics; `evaluate()` on a clock, `status()` for `hybridsync status`."""

    def __init__(
        self,
        alarms: list[Alarm],
        metrics: Metrics,
        notifications: Path,
        *,
        region: str,
        account: str,
        period_s: int | None = None,
        topics: dict[str, Topic] | None = None,
        namespaces: frozenset[str] = frozenset(),
    ):
        self.alarms, self.metrics, self.notifications = alarms, metrics, notifications
        self.region, self.account, self.period_s = region, account, period_s
        # topic ARN -> its policies; None: every publish allowed (unit tests of the evaluation alone)
        self.topics = topics
        self.namespaces = namespaces  # the stack's own metrics namespaces (a prefix's), measured whole
        self.sources = dict(LOCAL_SOURCES)  # and what the local app measures of AWS's namespaces
        self.notified = 0
        self.started = time.time()  # no period before it is evaluated
        self._lock = threading.RLock()  # evaluate() on the clock, set_state() from the Lambda API
        for alarm in alarms:
            alarm.record(self.started, "ConfigurationUpdate", f'Alarm "{alarm.name}" created',
                         {"type": "Create", "version": "1.0"})  # fmt: skip

    def arn(self, alarm: Alarm) -> str:
        return f"arn:aws:cloudwatch:{self.region}:{self.account}:alarm:{alarm.name}"

    def find(self, name: str) -> Alarm:
        """By its name (KeyError: no such alarm, as ResourceNotFound)."""
        for alarm in self.alarms:
            if alarm.name == name:
                return alarm
        raise KeyError(f"no alarm {name!r}")

    def period(self, alarm: Alarm) -> int:
        return self.period_s or alarm.period_s

    def evaluate(self, now: float | None = None) -> list[Alarm]:
        """Every alarm's state now; the alarms whose state changed."""
        now = now if now is not None else time.time()
        changed = []
        with self._lock:
            for alarm in self.alarms:
                state, reason = self._state(alarm, now)
                if state is None:
                    continue
                if state == alarm.state:
                    alarm.reason = reason  # the latest evaluation's, for `hybridsync status`
                    continue
                self._change(alarm, state, reason, now)
                changed.append(alarm)
        return changed

    def set_state(self, name: str, state: str, reason: str, now: float | None = None) -> Alarm:
        """SetAlarmState: the alarm in `state` now, its actions run if that is a change ("When the
        updated state differs from the previous value, the action configured for the appropriate
        state is invoked"); the next evaluation sets it to what its metric says (CloudWatch API
        reference, SetAlarmState)."""
        if state not in STATES:
            raise ValueError(f"StateValue must be one of {', '.join(STATES)}, not {state!r}")
        with self._lock:
            alarm = self.find(name)
            if state != alarm.state:
                self._change(alarm, state, reason, now if now is not None else time.time())
            return alarm

    def history(self, name: str, kind: str | None = None) -> list[dict[str, Any]]:
        """DescribeAlarmHistory of one alarm: newest first, of one HistoryItemType if given."""
        with self._lock:
            items = list(self.find(name).history)
        return [i for i in reversed(items) if kind is None or i["HistoryItemType"] == kind]

    def _change(self, alarm: Alarm, state: str, reason: str, now: float) -> None:
        old = alarm.state
        alarm.record(now, "StateUpdate", f"Alarm updated from {old} to {state}", {
            "version": "1.0", "oldState": {"stateValue": old, "stateReason": alarm.reason},
            "newState": {"stateValue": state, "stateReason": reason}})  # fmt: skip
        alarm.state, alarm.reason, alarm.since = state, reason, now
        if alarm.actions.get(state):
            self._notify(alarm, old, now)

    def _state(self, alarm: Alarm, now: float) -> tuple[str | None, str]:
        if not alarm.measured(self.namespaces, self.sources):
            what = f"{alarm.namespace}/{alarm.metric}" if alarm.metric else "a metric-math expression"
            return "INSUFFICIENT_DATA", f"not evaluated locally: {what} has no local source"
        period = self.period(alarm)
        current = math.floor(now / period) * period
        datapoints: list[float | None] = []  # None: a missing datapoint
        for k in range(alarm.evaluation_periods, 0, -1):  # the last complete periods, oldest first
            start = current - k * period
            values = self.metrics.values(
                alarm.namespace, alarm.metric, alarm.dimensions, start, start + period
            )
            if values:
                datapoints.append(statistic(values, alarm.statistic))
            elif start >= self.started:  # a whole period of the alarm's life without data
                datapoints.append(None)
        present = [d for d in datapoints if d is not None]
        breach = BREACHES[alarm.comparison]
        if not present and alarm.missing in ("missing", "ignore"):
            if alarm.missing == "ignore" or not datapoints:
                return None, ""  # nothing to say yet, or nothing the rule lets it say
            return "INSUFFICIENT_DATA", f"no datapoints in the last {alarm.evaluation_periods} period(s)"
        breaching = sum(1 for d in present if breach(d, alarm.threshold))
        if alarm.missing == "breaching":
            breaching += len(datapoints) - len(present)
        shown = "[" + ", ".join("-" if d is None else f"{d:g}" for d in datapoints) + "]"
        if breaching >= alarm.datapoints_to_alarm:
            return "ALARM", (
                f"Threshold Crossed: {breaching} datapoint(s) {shown} breached "
                f"{alarm.comparison} {alarm.threshold:g} ({alarm.statistic}, {period} s)"
            )
        return "OK", (
            f"Threshold not crossed: {breaching} of {alarm.datapoints_to_alarm} needed "
            f"datapoint(s) {shown} breached {alarm.threshold:g}"
        )

    def _notify(self, alarm: Alarm, old: str, now: float) -> None:
        """What a subscriber of the alarm's topic receives (CloudWatch's alarm message in SNS's
        envelope), one file per notification and topic."""
        at = datetime.fromtimestamp(now, UTC)
        message = {
            "AlarmName": alarm.name,
            "AlarmDescription": alarm.description,
            "AWSAccountId": self.account,
            "NewStateValue": alarm.state,
            "NewStateReason": alarm.reason,
            "StateChangeTime": at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}+0000",
            "Region": self.region,
            "OldStateValue": old,
            "AlarmArn": self.arn(alarm),
            "Trigger": {
                "MetricName": alarm.metric,
                "Namespace": alarm.namespace,
                "Statistic": alarm.statistic,
                "Dimensions": [{"name": k, "value": v} for k, v in alarm.dimensions.items()],
                "Period": self.period(alarm),
                "EvaluationPeriods": alarm.evaluation_periods,
                "ComparisonOperator": alarm.comparison,
                "Threshold": alarm.threshold,
                "TreatMissingData": alarm.missing,
            },
        }
        self.notifications.mkdir(parents=True, exist_ok=True)
        for topic in alarm.actions[alarm.state]:
            refused = None
            if self.topics is not None:
                refused = refusal(self.topics.get(topic), topic, self.arn(alarm), self.account)
            data = {
                "actionState": "Failed" if refused else "Succeeded",
                "notificationResource": topic,
                "stateUpdateTimestamp": int(now * 1000),
                "error": refused[0] if refused else None,
            }
            if refused:  # nothing reaches the subscribers; the history says why, as AWS's does
                summary = f'Failed to execute action {topic}. Received error: "{refused[0]}"'
                alarm.record(now, "Action", summary, data | {"localNote": refused[1]})
                continue
            # AWS's Action item carries the message it published (`publishedMessage`)
            alarm.record(now, "Action", f"Successfully executed action {topic}",
                         data | {"publishedMessage": json.dumps(message)})  # fmt: skip
            envelope = {
                "Type": "Notification",
                "TopicArn": topic,
                "Subject": f'{alarm.state}: "{alarm.name}" in {self.region}'[:100],
                "Message": json.dumps(message),
                "Timestamp": message["StateChangeTime"],
            }
            name = f"{at:%Y%m%dT%H%M%S%f}-{alarm.name}-{alarm.state}.json"
            staged = self.notifications / f".{name}.tmp"  # a reader globbing *.json never sees half a file
            staged.write_text(json.dumps(envelope, indent=1))
            staged.replace(self.notifications / name)
            self.notified += 1

    def status(self, history: int = 5) -> dict[str, dict[str, Any]]:
        """Each alarm's state, reason and its last `history` history items, newest first (their
        Timestamp, HistoryItemType and HistorySummary: the status file is written every second;
        the Lambda API's history route has the whole items)."""
        shown = ("Timestamp", "HistoryItemType", "HistorySummary")
        with self._lock:
            return {
                a.name: {
                    "state": a.state,
                    "reason": a.reason,
                    "history": [{k: i[k] for k in shown} for i in list(reversed(a.history))[:history]],
                }
                for a in self.alarms
            }
