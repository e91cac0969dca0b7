"""CloudWatch, locally: every synthesized alarm evaluated each second on what the app emits
(cloudwatch/alarms.py), the topics they notify, and the figures `status` reads from the functions'
metrics (freshness, the outbox)."""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from hybridsync.local.account import Account
from hybridsync.local.awslambda.functions import LocalFunction
from hybridsync.local.cloudwatch.alarms import Alarm, Alarms, Topic, percentiles_s
from hybridsync.local.storage import Storage
from hybridsync.local.template import ACCOUNT, Assembly

if TYPE_CHECKING:  # its type only: the twin imports the app's account
    from hybridsync.local.dynamodb.replication import Replicator

log = logging.getLogger(__name__)
# each direction's freshness (the `Freshness` metric, ms), by the function that emits it: DynamoDB ->
# PostgreSQL row, DynamoDB -> aggregate, PostgreSQL -> DynamoDB
FRESHNESS = {"write_back": "WriteBack", "aggregate": "Aggregate", "sql_sync": "SqlSync"}
FRESHNESS_WINDOW_S = 300  # what `status` summarizes: the alarms' period


class CloudWatch:
    """The app's alarms (None before `start`) over the account's metrics."""

    def __init__(self, account: Account, storage: Storage, period_s: int | None) -> None:
        self.account, self.storage = account, storage
        self.functions: dict[str, LocalFunction] = account.functions
        self.alarms: Alarms | None = None
        if period_s is not None and period_s < 1:
            raise ValueError("the alarm period must be at least 1 s")
        self.alarm_period_s = period_s

    def provision(self, account: Account, assembly: Assembly) -> None:
        """Every synthesized alarm, on the account's metrics (evaluated each second once started)."""
        found = []
        for resource in assembly.resources("AWS::CloudWatch::Alarm"):
            properties = assembly.resolve(resource.stack, resource.properties)
            found.append(Alarm.from_properties(f"{account.prefix}-{resource.construct}", properties))
        own = frozenset(str(f.environment.get("POWERTOOLS_METRICS_NAMESPACE", "hybridsync"))
                        for f in self.functions.values())  # fmt: skip
        self.alarms = Alarms(found, account.metrics, account.state_dir / "notifications",
                             region=account.region, account=ACCOUNT, period_s=self.alarm_period_s,
                             topics=self.topics(), namespaces=own)  # fmt: skip
        for function in self.functions:  # what earlier runs logged is not this run's metrics
            account.metrics.skip(account.state_dir / "logs" / f"{function}.log")

    def measure_replication(self, replicator: Replicator) -> None:
        """DynamoDB's `ReplicationLatency` as the twin measures it, per table and `ReceivingRegion`, in
        ms: "the elapsed time between when an item is updated in the DynamoDB stream for one replica
        table, and when that item appears in another replica" (DynamoDB's metrics-dimensions page),
        for the writes made in this CloudWatch's Region (home's; after a failover the old home's,
        whose stacks hold the alarms). A Region cut off gets nothing, so it reports nothing until
        it is back, and then its late writes' latency."""
        assert self.alarms is not None
        self.alarms.sources |= {"AWS/DynamoDB": {"ReplicationLatency"}}
        metrics, own = self.account.metrics, self.account.region

        def measured(source: str, table: str, region: str, ms: float) -> None:
            if source == own:
                dimensions = {"TableName": table, "ReceivingRegion": region}
                metrics.put("AWS/DynamoDB", "ReplicationLatency", dimensions, ms)

        replicator.on_latency = measured

    def start(self) -> None:
        """Every alarm evaluated each second on what the app emits."""
        assert self.alarms is not None
        self.alarms.evaluate()  # every alarm has a state before the app serves
        self.account.spawn(self._watch, name="alarms")

    def topics(self) -> dict[str, Topic]:
        """Each topic of the templates with what decides whether CloudWatch may publish to it: its
        AWS::SNS::TopicPolicy (none: SNS's default policy), its key, and that key's policy when the
        templates make the key (an imported key's policy is not theirs to show)."""
        a = self.account.assembly

        def statements(stack: str, document: Any) -> list[dict[str, Any]]:
            listed = (a.resolve(stack, document) or {}).get("Statement", [])
            return self.localized(listed if isinstance(listed, list) else [listed])

        policies: dict[str, list[dict[str, Any]]] = {}
        for policy in a.resources("AWS::SNS::TopicPolicy"):
            for arn in a.resolve(policy.stack, policy.properties.get("Topics", [])):
                policies.setdefault(arn, []).extend(
                    statements(policy.stack, policy.properties["PolicyDocument"])
                )
        keys: dict[str, list[dict[str, Any]]] = {}
        for key in a.resources("AWS::KMS::Key"):
            for name in (a.resolve(key.stack, {"Ref": key.logical_id}),
                         a.resolve(key.stack, {"Fn::GetAtt": [key.logical_id, "Arn"]})):  # fmt: skip
                keys[name] = statements(key.stack, key.properties.get("KeyPolicy", {}))
        for alias in a.resources("AWS::KMS::Alias"):
            if (target := a.resolve(alias.stack, alias.properties.get("TargetKeyId"))) in keys:
                keys[alias.properties["AliasName"]] = keys[target]
        found = {}
        for topic in a.resources("AWS::SNS::Topic"):
            arn = a.resolve(topic.stack, {"Ref": topic.logical_id})
            key = str(a.resolve(topic.stack, topic.properties.get("KmsMasterKeyId")) or "") or None
            found[arn] = Topic(arn, policies.get(arn), key, keys.get(key) if key else None)
            if key and key not in keys:
                why = "a key the templates do not make: CloudWatch's publish to it is refused locally"
                log.warning(
                    "%s is under %s, %s, as its policy cannot be shown to allow it", topic.path, key, why
                )
        return found

    def localized(self, value: Any) -> Any:
        """A pinned stack's literal account and region (`-c kms_key_arn=` pins them to the key's) as the
        local app's: a policy saying `arn:aws:cloudwatch:eu-west-1:111122223333:alarm:*` means this
        app's alarms here, as it means the deployed stack's alarms there."""
        manifest = self.account.assembly.directory / "manifest.json"
        pinned = set()
        if manifest.is_file():
            for artifact in json.loads(manifest.read_text()).get("artifacts", {}).values():
                account, _, region = (
                    str(artifact.get("environment", "")).removeprefix("aws://").partition("/")
                )
                if account.isdigit() and region and region != "unknown-region":
                    pinned.add((account, region))
        text = json.dumps(value)
        for account, region in pinned:
            text = text.replace(f":{region}:{account}:", f":{self.account.region}:{ACCOUNT}:")
            text = text.replace(f'"{account}"', f'"{ACCOUNT}"')
        return json.loads(text)

    def _watch(self) -> None:
        logs = self.account.state_dir / "logs"
        while not self.account.stopping.wait(1.0):
            try:
                for function in self.functions:
                    self.account.metrics.tail(logs / f"{function}.log")
                for name, depth in self.storage.sample()[0].items():
                    self.account.metrics.put(
                        "AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": name}, depth
                    )
                assert self.alarms is not None
                for alarm in self.alarms.evaluate():
                    level = logging.WARNING if alarm.state == "ALARM" else logging.INFO
                    log.log(level, "alarm %s: %s (%s)", alarm.name, alarm.state, alarm.reason)
            except Exception:
                log.exception("evaluating the alarms")

    def freshness_values(self, since: float) -> dict[str, list[float]]:
        """Each direction's `Freshness` values (ms) since `since`, oldest first, as the alarms read them:
        from the EMF lines of its function's log, in the function's namespace and `service`. Only the
        directions whose function the app has."""
        functions = {direction: self.functions.get(construct) for direction, construct in FRESHNESS.items()}
        return {d: self.emitted(f, "Freshness", since) for d, f in functions.items() if f is not None}

    def emitted(self, function: LocalFunction, name: str, since: float = 0) -> list[float]:
        """A metric's values a function emitted (Powertools EMF: its namespace and `service`), oldest
        first, from `since` (the stacks set both variables on every engine function)."""
        namespace = str(function.environment.get("POWERTOOLS_METRICS_NAMESPACE", "hybridsync"))
        service = str(function.environment.get("POWERTOOLS_SERVICE_NAME", namespace))
        return self.account.metrics.values(namespace, name, {"service": service}, since)

    def freshness(self, window_s: float = FRESHNESS_WINDOW_S) -> dict[str, dict[str, Any]]:
        """Per direction, p50 and p99 (s) and the count of the freshness values of the last `window_s`."""
        since = time.time() - window_s
        return {d: percentiles_s(values) for d, values in self.freshness_values(since).items()}

    def outbox(self) -> dict[str, Any] | None:
        """The drain's figures as its metrics tell them (the outbox as the last run left it; rows
        since the app started), and its function's failures."""
        function = self.functions.get("SqlSync")
        if function is None:
            return None

        def values(name: str) -> list[float]:
            return self.emitted(function, name)

        figures = {key: int(sum(values(name))) for key, name in (
            ("applied", "OutboxApplied"), ("superseded", "OutboxSuperseded"),
            ("dead_lettered", "DeadLetters"), ("deferred", "OutboxDeferred"))}  # fmt: skip
        return figures | {
            "depth": int((values("OutboxDepth") or [0])[-1]),
            "oldest_age_s": round((values("OutboxAge") or [0.0])[-1], 3),
            "errors": function.stats.errors,
            "last_error": function.stats.last_error or None,
        }
