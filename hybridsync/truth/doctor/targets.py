"""Where the app runs, as `hybridsync doctor` checks it: the deployed stacks (`Deployed`) or the
local app of `hybridsync up` (`Local`), both a `Target`."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from hybridsync.truth.doctor import replicas as replica_checks
from hybridsync.truth.doctor.inventory import STACKS, App, Check, Topic
from hybridsync.truth.templates import Id

INVOKE_TIMEOUT_S = 120  # a cold VPC function plus its probe (each call bounded by its connect timeout)


class ProbeFailed(Exception):
    """A function did not answer the probe (it failed, or could not be invoked)."""


class Target(Protocol):
    """The running app doctor checks: deployed stacks (`Deployed`) or the local app (`Local`)."""

    where: str

    def invoke(self, function: Id, event: dict[str, Any]) -> dict[str, Any]: ...
    def secrets(self, function: Id, variables: list[str]) -> list[str]: ...
    def proxy(self, proxy: Id) -> list[Check]: ...
    def vpc_dns(self, vpc_id: str) -> Check: ...
    def mapping_states(self, function: Id, mappings: list[Id]) -> dict[Id, str | None]: ...
    def enable_hint(self, mapping: Id) -> str: ...
    def subscribers(self, topic: Topic) -> Check: ...
    def alarm_name(self, alarm: Id) -> str: ...
    def set_alarm_state(self, alarm: Id, state: str, reason: str) -> None: ...
    def alarm_history(self, alarm: Id, since: datetime) -> list[dict[str, Any]]: ...
    def replicas(self, table: Id, regions: list[str]) -> list[Check]: ...


def invoke_probe(client: Any, name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Invoke a function's `live` alias (what the mappings, the API and the schedules invoke) with
    the probe; its answer, or ProbeFailed saying why there is none."""
    try:
        response = client.invoke(FunctionName=name, Qualifier="live", Payload=json.dumps(event).encode())
    except Exception as error:
        raise ProbeFailed(f"could not invoke it: {error}") from None
    body = response["Payload"].read()
    answer = json.loads(body) if body else None
    if response.get("FunctionError") or not isinstance(answer, dict) or "services" not in answer:
        why = answer.get("errorMessage") if isinstance(answer, dict) else None
        raise ProbeFailed(f"it did not answer the probe ({why or str(answer)[:200]})")
    return answer


class Deployed:
    """The stacks `<prefix>-data|database|pipeline|api|monitoring` in the account and region of the
    caller's credentials: their templates (GetTemplate) and physical resources (ListStackResources)."""

    def __init__(self, prefix: str, client: Callable[..., Any]):
        self.prefix, self.client, self.where = prefix, client, f"the deployed stacks {prefix}-*"
        cloudformation = client("cloudformation")
        self.templates: dict[str, dict[str, Any]] = {}
        self.physical: dict[Id, str] = {}
        for suffix in STACKS:
            stack = f"{prefix}-{suffix}"
            body = cloudformation.get_template(StackName=stack, TemplateStage="Original")["TemplateBody"]
            self.templates[stack] = json.loads(body) if isinstance(body, str) else dict(body)
            pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
            for page in pages:
                for r in page["StackResourceSummaries"]:
                    self.physical[(stack, r["LogicalResourceId"])] = r.get("PhysicalResourceId", "")
        self.functions = client("lambda", read_timeout=INVOKE_TIMEOUT_S)

    def invoke(self, function: Id, event: dict[str, Any]) -> dict[str, Any]:
        return invoke_probe(self.functions, self.physical[function], event)

    def replicas(self, table: Id, regions: list[str]) -> list[Check]:
        name = self.physical.get(table, table[1])
        return replica_checks.deployed(self.client("dynamodb"), self.client("cloudwatch"), name, regions)

    def secrets(self, function: Id, variables: list[str]) -> list[str]:
        return variables

    def proxy(self, proxy: Id) -> list[Check]:
        name = self.physical.get(proxy, "")
        subject = f"{proxy[0]}/{name}"
        try:
            targets = self.client("rds").describe_db_proxy_targets(DBProxyName=name)["Targets"]
        except Exception as error:
            return [
                Check(
                    "proxy",
                    subject,
                    False,
                    f"cannot list its targets: {error}",
                    "is the database stack deployed, and may you call rds:DescribeDBProxyTargets?",
                )
            ]
        judged = [t for t in targets if t.get("TargetHealth")]
        if not judged:
            return [
                Check(
                    "proxy",
                    subject,
                    False,
                    "no target with a health state (none registered yet?)",
                    "wait for the cluster's instances to be available, then run doctor again",
                )
            ]
        checks = []
        for target in judged:
            health = target["TargetHealth"]
            what = f"target {target.get('RdsResourceId') or target.get('Endpoint')}"
            if health.get("State") == "AVAILABLE":
                checks.append(Check("proxy", subject, True, f"{what} AVAILABLE"))
            else:
                why = " ".join(x for x in (health.get("Reason"), health.get("Description")) if x)
                checks.append(
                    Check(
                        "proxy",
                        subject,
                        False,
                        f"{what} {health.get('State')}: {why}",
                        "AUTH_FAILURE: the proxy's secrets and its role's access to them; "
                        "CONNECTION_FAILED, UNREACHABLE: the database's security group must admit the "
                        "proxy's; PENDING_PROXY_CAPACITY: wait and run doctor again",
                    )
                )
        return checks

    def vpc_dns(self, vpc_id: str) -> Check:
        """Private DNS answers in a VPC only with its `enableDnsSupport` and `enableDnsHostnames` both
        true (EC2 API, CreateVpcEndpoint PrivateDnsEnabled: "To use a private hosted zone, you must
        set the following VPC attributes to true"): else a service's own name does not resolve to its
        endpoint, and without a NAT the call times out."""
        ec2, off = self.client("ec2"), []
        try:
            for attribute, key in (("enableDnsSupport", "EnableDnsSupport"),
                                   ("enableDnsHostnames", "EnableDnsHostnames")):  # fmt: skip
                answer = ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)
                if not answer.get(key, {}).get("Value"):
                    off.append(attribute)
        except Exception as error:
            return Check("network", vpc_id, False, f"cannot read its DNS attributes: {error}",
                         "may you call ec2:DescribeVpcAttribute?")  # fmt: skip
        if off:
            return Check(
                "network", vpc_id, False, f"{' and '.join(off)} off: private DNS does not answer in it",
                "aws ec2 modify-vpc-attribute --vpc-id " + vpc_id + " --enable-dns-support / "
                "--enable-dns-hostnames (one attribute a call)",
            )  # fmt: skip
        return Check(
            "network", vpc_id, True, "enableDnsSupport and enableDnsHostnames on: private DNS answers"
        )

    def mapping_states(self, function: Id, mappings: list[Id]) -> dict[Id, str | None]:
        client = self.client("lambda")
        states: dict[Id, str | None] = {}
        for mapping in mappings:
            try:
                states[mapping] = client.get_event_source_mapping(UUID=self.physical[mapping])["State"]
            except (KeyError, client.exceptions.ResourceNotFoundException):
                states[mapping] = None
        return states

    def enable_hint(self, mapping: Id) -> str:
        return f"aws lambda update-event-source-mapping --uuid {self.physical.get(mapping)} --enabled"

    def subscribers(self, topic: Topic) -> Check:
        arn = topic if isinstance(topic, str) else self.physical.get(topic, "")
        pages = self.client("sns").get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn)
        subscriptions = [s for page in pages for s in page.get("Subscriptions", [])]
        confirmed = [
            s for s in subscriptions if s["SubscriptionArn"] not in ("PendingConfirmation", "Deleted")
        ]
        pending = len(subscriptions) - len(confirmed)
        if confirmed:
            protocols = ", ".join(sorted({s["Protocol"] for s in confirmed}))
            return Check(
                "alarm", arn, True, f"heard by {len(confirmed)} confirmed subscription(s) ({protocols})"
            )
        return Check(
            "alarm",
            arn,
            False,
            "no confirmed subscription: nobody hears the alarms"
            + (f" ({pending} pending)" if pending else ""),
            "confirm the subscription mail"
            if pending
            else "subscribe someone: -c alarm_email=you@example.com at deploy (then confirm the mail), or "
            f"aws sns subscribe --topic-arn {arn} --protocol email --notification-endpoint you@example.com",
        )

    def alarm_name(self, alarm: Id) -> str:
        return self.physical.get(alarm, alarm[1])

    def set_alarm_state(self, alarm: Id, state: str, reason: str) -> None:
        self.client("cloudwatch").set_alarm_state(
            AlarmName=self.alarm_name(alarm), StateValue=state, StateReason=reason
        )

    def alarm_history(self, alarm: Id, since: datetime) -> list[dict[str, Any]]:
        return list(
            self.client("cloudwatch").describe_alarm_history(
                AlarmName=self.alarm_name(alarm),
                HistoryItemType="Action",
                StartDate=since,
                ScanBy="TimestampDescending",
                MaxRecords=20,
            )["AlarmHistoryItems"]
        )


class Local:
    """The local app of `hybridsync up`, through its Lambda API (`LAMBDA_ENDPOINT` of its env file):
    its functions invoked, its mappings listed, its canary driven through the app's alarm routes
    (`/hybridsync/alarms/<name>/...`). RDS Proxy is not emulated (the functions log in to the local
    server directly); the notifications folder stands in for a confirmed subscription."""

    def __init__(self, app: App, lambda_endpoint: str, prefix: str, notifications: Path):
        from hybridsync.runtime import aws

        self.app, self.endpoint, self.prefix, self.notifications = app, lambda_endpoint, prefix, notifications
        self.where = f"the local app at {lambda_endpoint}"
        self.client = aws.client("lambda", lambda_endpoint, read_timeout=INVOKE_TIMEOUT_S)

    def invoke(self, function: Id, event: dict[str, Any]) -> dict[str, Any]:
        return invoke_probe(self.client, self.app.construct(function), event)

    def replicas(self, table: Id, regions: list[str]) -> list[Check]:
        """The twin's figures as `hybridsync up` last wrote them (its status file)."""
        status = self.notifications.parent / "status.json"
        try:
            replication = json.loads(status.read_text()).get("replication")
        except (OSError, ValueError):
            replication = None
        name = (
            f"{self.prefix}-{self.app.resource(table).get('Metadata', {}).get('hybridsync:table', table[1])}"
        )
        return replica_checks.local(replication, name, regions)

    def secrets(self, function: Id, variables: list[str]) -> list[str]:
        # A login through the proxy (IAM) reads its login's secret locally instead (local/postgres/logins.py)
        if "DB_ROLE" in self.app.environment(function) and "DB_SECRET_ARN" not in variables:
            return [*variables, "DB_SECRET_ARN"]
        return variables

    def proxy(self, proxy: Id) -> list[Check]:
        return [
            Check(
                "proxy",
                self.app.path(proxy),
                True,
                "not emulated locally: the functions log in to the local server directly "
                "(`hybridsync doctor --deployed` checks the proxy's targets)",
            )
        ]

    def vpc_dns(self, vpc_id: str) -> Check:
        return Check("network", vpc_id, True, "a VPC's DNS attributes are not emulated locally "
                     "(`hybridsync doctor --deployed` reads them)")  # fmt: skip

    def mapping_states(self, function: Id, mappings: list[Id]) -> dict[Id, str | None]:
        # listed in the template's order, as the local app creates them
        listed = self.client.list_event_source_mappings(FunctionName=self.app.construct(function))
        states = [m["State"] for m in listed["EventSourceMappings"]]
        return {m: states[n] if n < len(states) else None for n, m in enumerate(mappings)}

    def enable_hint(self, mapping: Id) -> str:
        return "UpdateEventSourceMapping Enabled=true on the local Lambda API ($LAMBDA_ENDPOINT)"

    def subscribers(self, topic: Topic) -> Check:
        return Check(
            "alarm",
            self.app.topic_name(topic),
            True,
            f"heard by the notifications folder {self.notifications}/ (the local app writes every "
            "notification there: its confirmed subscription)",
        )

    def alarm_name(self, alarm: Id) -> str:
        return f"{self.prefix}-{self.app.construct(alarm)}"  # the local app's name of it

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import urllib.parse
        import urllib.request

        request = urllib.request.Request(
            f"{self.endpoint}{urllib.parse.quote(path)}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def set_alarm_state(self, alarm: Id, state: str, reason: str) -> None:
        self._call(
            "POST",
            f"/hybridsync/alarms/{self.alarm_name(alarm)}/state",
            {"StateValue": state, "StateReason": reason},
        )

    def alarm_history(self, alarm: Id, since: datetime) -> list[dict[str, Any]]:
        answer = self._call("GET", f"/hybridsync/alarms/{self.alarm_name(alarm)}/history")
        items = answer.get("AlarmHistoryItems", []) if isinstance(answer, dict) else answer or []
        return [i for i in items if _when(i.get("Timestamp")) >= since]


def _when(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
