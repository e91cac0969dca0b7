"""CloudWatch, locally: the metrics the app really emits, and the synthesized alarms evaluated on them.

Metrics come from where AWS takes them: the functions' Powertools EMF lines in their logs (namespace
`hybridsync`), Lambda's own per-function metrics as the local runtime counts them (Invocations,
Errors, Throttles, Duration, IteratorAge, DeadLetterErrors, DestinationDeliveryFailures) and the
mappings' event counts (MetricsConfig EventCount), the queues' depth, and the HTTP API's requests,
5xx and latency. A metric with no local source (DynamoDB's throttles, RDS Proxy, Aurora) leaves its
alarm in INSUFFICIENT_DATA, saying so.

An alarm is evaluated as CloudWatch documents it ("Evaluating an alarm"): its statistic over each of
the last `EvaluationPeriods` complete periods (aligned to the clock), ALARM when `DatapointsToAlarm`
of them breach, a period without data treated by `TreatMissingData` (missing: INSUFFICIENT_DATA when
all are missing; ignore: the state stays); periods before the alarm existed never count.
`period_s` shortens every alarm's period alike (`hybridsync up --alarm-period`), to see a 5-minute
alarm go and come back in seconds. Each change of state with an action for the new state is what
the topic's subscribers receive (CloudWatch's alarm message, in SNS's envelope): one JSON file in
`notifications/`.
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

STATES = ("OK", "ALARM", "INSUFFICIENT_DATA")
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
        self, namespace: str, name: str, dimensions: dict[str, str], start: float, end: float
    ) -> list[float]:
        with self._lock:
            points = list(self._points.get((namespace, name, frozenset(dimensions.items())), ()))
        return [v for t, v in points if start <= t < end]

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
    if found := PERCENTILE.fullmatch(name):  # nearest rank
        ordered = sorted(values)
        return ordered[max(0, math.ceil(float(found[1]) / 100 * len(ordered)) - 1)]
    raise ValueError(f"statistic {name!r} is not evaluated locally")


BREACHES = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


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

    def measured(self) -> bool:
        if not self.metric:
            return False
        names = LOCAL_SOURCES.get(self.namespace, set())
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
    ):
        self.alarms, self.metrics, self.notifications = alarms, metrics, notifications
        self.region, self.account, self.period_s = region, account, period_s
        self.notified = 0
        self.started = time.time()  # no period before it is evaluated

    def period(self, alarm: Alarm) -> int:
        return self.period_s or alarm.period_s

    def evaluate(self, now: float | None = None) -> list[Alarm]:
        """Every alarm's state now; the alarms whose state changed."""
        now = now if now is not None else time.time()
        changed = []
        for alarm in self.alarms:
            state, reason = self._state(alarm, now)
            if state is None:
                continue
            if state == alarm.state:
                alarm.reason = reason  # the latest evaluation's, for `hybridsync status`
                continue
            old, alarm.state, alarm.reason, alarm.since = alarm.state, state, reason, now
            changed.append(alarm)
            if alarm.actions.get(state):
                self._notify(alarm, old, now)
        return changed

    def _state(self, alarm: Alarm, now: float) -> tuple[str | None, str]:
        if not alarm.measured():
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
            "AlarmArn": f"arn:aws:cloudwatch:{self.region}:{self.account}:alarm:{alarm.name}",
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
            envelope = {
                "Type": "Notification",
                "TopicArn": topic,
                "Subject": f'{alarm.state}: "{alarm.name}" in {self.region}'[:100],
                "Message": json.dumps(message),
                "Timestamp": message["StateChangeTime"],
            }
            name = f"{at:%Y%m%dT%H%M%S%f}-{alarm.name}-{alarm.state}.json"
            (self.notifications / name).write_text(json.dumps(envelope, indent=1))
            self.notified += 1

    def status(self) -> dict[str, dict[str, str]]:
        return {a.name: {"state": a.state, "reason": a.reason} for a in self.alarms}
