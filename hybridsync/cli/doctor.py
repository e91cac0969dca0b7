"""`hybridsync doctor`: what the app needs to work, checked where it runs (the deployed stacks, or the
local app of `hybridsync up`), one line per check: from inside each VPC function (its probe,
hybridsync/runtime/doctor.py) every service it needs, each secret it reads and its database login; the RDS
Proxy's targets; every stream mapping enabled, or paused on purpose; every alarm's topic heard by
a confirmed subscription; and a canary alarm driven to ALARM and back, whose history must show
CloudWatch's "Successfully executed action". What to check comes from the synthesized templates
(`hybridsync.cdk.rules`), the same ones the stacks were deployed from."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from hybridsync.cdk import rules
from hybridsync.cdk.rules import SECRET_TYPES, Id
from hybridsync.cli.common import Commands

Topic = Id | str  # one of the stacks' topics, or a team's own by its ARN
STACKS = ("data", "database", "pipeline", "api", "monitoring")
SUCCEEDED, FAILED = "Successfully executed action", "Failed to execute action"
INVOKE_TIMEOUT_S = 120  # a cold VPC function plus its probe (each call bounded by its connect timeout)
# Lambda's transitional states: a mapping in one is neither running nor paused yet
TRANSITIONS = ("Creating", "Enabling", "Disabling", "Updating", "Deleting")


@dataclass(frozen=True)
class Check:
    """One verdict: `kind` (network, secret, database, probe, proxy, mapping, alarm, canary), what it
    is about, what was found, and on a failure what to do."""

    kind: str
    subject: str
    ok: bool
    message: str
    fix: str = ""

    def line(self) -> str:
        text = f"{'ok  ' if self.ok else 'FAIL'} {self.kind:8} {self.subject} {self.message}"
        return text + (f"; {self.fix}" if self.fix and not self.ok else "")


# --- what the templates say ----------------------------------------------------------------------


class App:
    """The synthesized app as doctor reads it: the functions to probe and what each needs, the
    mappings, the proxies, the alarms and their topics, the canary."""

    def __init__(self, templates: Any):
        self.templates = templates  # hybridsync.cdk.rules.Templates

    def resource(self, ident: Id) -> dict[str, Any]:
        return self.templates.get(ident) or {}

    def name(self, ident: Id) -> str:
        """`<stack>/<construct id>` (`HybridSync-pipeline/Operations`), from the construct path."""
        path = str(self.resource(ident).get("Metadata", {}).get("aws:cdk:path", ""))
        parts = path.split("/")
        return f"{ident[0]}/{parts[1]}" if len(parts) > 2 else f"{ident[0]}/{ident[1]}"

    def path(self, ident: Id) -> str:
        """The construct path without its `/Resource` (`HybridSync-database/Cluster/Proxy`)."""
        path = str(self.resource(ident).get("Metadata", {}).get("aws:cdk:path", ""))
        return path.removesuffix("/Resource") or f"{ident[0]}/{ident[1]}"

    def construct(self, ident: Id) -> str:
        return self.name(ident).split("/", 1)[1]

    def environment(self, ident: Id) -> dict[str, Any]:
        return dict(self.resource(ident).get("Properties", {}).get("Environment", {}).get("Variables", {}))

    def functions(self) -> list[Id]:
        """The engine's functions attached to a VPC (those whose network the stacks decide)."""
        return [
            ident
            for ident, f in self.templates.resources("AWS::Lambda::Function")
            if f.get("Properties", {}).get("VpcConfig")
            and str(f["Properties"].get("Handler", "")).startswith("hybridsync.functions.")
        ]

    def secret_variables(self, function: Id) -> list[str]:
        """The variables of its environment that name a secret (a reference to one, or an ARN)."""
        found = []
        for variable, value in self.environment(function).items():
            named = self.templates.mentions(function[0], value)
            kinds = {self.resource(i).get("Type") for i in named}
            if kinds & set(SECRET_TYPES) or ":secretsmanager:" in self.templates.text(function[0], value):
                found.append(variable)
        return sorted(found)

    def mappings(self) -> list[tuple[Id, Id | None, bool]]:
        """(mapping, its function, whether the template creates it enabled)."""
        return [
            (
                ident,
                self.templates.function_of(ident[0], m["Properties"]["FunctionName"]),
                m["Properties"].get("Enabled", True) is not False,
            )
            for ident, m in self.templates.resources("AWS::Lambda::EventSourceMapping")
        ]

    def proxies(self) -> list[Id]:
        return [ident for ident, _ in self.templates.resources("AWS::RDS::DBProxy")]

    def private_dns_vpcs(self) -> list[str]:
        """The team's own VPCs (by their literal id: `-c existing_db_vpc_id=`) that private DNS must
        answer in: one an interface endpoint of the stacks with private DNS is in, or one whose routes
        the stacks say are the team's (its own endpoints). Synth cannot read their attributes."""
        found = [
            e["Properties"]["VpcId"]
            for _, e in self.templates.resources("AWS::EC2::VPCEndpoint")
            if e["Properties"].get("PrivateDnsEnabled") and isinstance(e["Properties"].get("VpcId"), str)
        ]
        found += [
            g["Properties"]["VpcId"]
            for _, g in self.templates.resources("AWS::EC2::SecurityGroup")
            if "hybridsync:routes" in g.get("Metadata", {}) and isinstance(g["Properties"].get("VpcId"), str)
        ]
        return sorted(set(found))

    def alarms(self) -> dict[Id, list[Topic | None]]:
        """Each alarm -> the topics its actions name: one of the stacks', or a team's own by its ARN
        (`-c alarm_topic_arn=`); None for an action that is not a topic."""
        found: dict[Id, list[Topic | None]] = {}
        for ident, alarm in self.templates.resources("AWS::CloudWatch::Alarm"):
            properties = alarm["Properties"]
            actions = [
                a
                for key in ("AlarmActions", "OKActions", "InsufficientDataActions")
                for a in properties.get(key, [])
            ]
            topics: list[Topic | None] = []
            for action in actions:
                topic = self.templates.target(ident[0], action)
                text = self.templates.text(ident[0], action)
                if topic and self.resource(topic).get("Type") == "AWS::SNS::Topic":
                    topics.append(topic)
                else:
                    topics.append(text if topic is None and ":sns:" in text else None)
            found[ident] = list(dict.fromkeys(topics))
        return found

    def topic_name(self, topic: Topic) -> str:
        return topic if isinstance(topic, str) else self.name(topic)

    def canary(self) -> Id | None:
        """The monitoring stack's alarm doctor drives (by its construct id, rules.CANARY)."""
        canary = rules.CANARY
        return next((i for i in self.alarms() if self.construct(i) == canary), None)


# --- where the app runs --------------------------------------------------------------------------


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


# --- the checks ----------------------------------------------------------------------------------

Network = Callable[[Any, str, str], Any]  # hybridsync.cdk.rules.network


def probe_event(app: App, target: Target, function: Id, needed: dict[str, str]) -> dict[str, Any]:
    return {
        "hybridsync": "doctor",
        "services": sorted(needed),
        "secrets": target.secrets(function, app.secret_variables(function)),
        "database": "DB_ROLE" in app.environment(function),
    }


def judge_probe(app: App, function: Id, network: Any, answer: dict[str, Any]) -> list[Check]:
    """A function's answer to the probe, as checks."""
    name = app.name(function)
    needed = dict(network.needed) if network else {}
    reachable = dict(network.reachable) if network else {}
    checks = []
    if not needed:
        checks.append(Check("network", name, True, "needs no AWS service from its VPC (by its role)"))
    for service, result in sorted(answer.get("services", {}).items()):
        why, how = needed.get(service, "asked"), reachable.get(service)
        if result["outcome"] == "reached":
            checks.append(Check("network", name, True, f"reaches {service} ({how or result['detail']})"))
            continue
        fix = (
            f"the route the stacks give ({how}) does not answer: the endpoint's state and security group"
            if how
            else f"the stacks give it no route to {service}: an endpoint for it (the synth's rules "
            "name it), or a NAT"
        )
        checks.append(
            Check("network", name, False, f"cannot reach {service} ({why}): {result['detail']}", fix)
        )
    for label, result in sorted(answer.get("secrets", {}).items()):
        if result["outcome"] == "readable":
            checks.append(Check("secret", name, True, f"reads {label}"))
            continue
        detail = result["detail"]
        if "kms" in detail.lower() or detail.startswith("DecryptionFailure"):
            fix = "its role needs kms:Decrypt on the secret's key (and the key policy must allow it)"
        elif detail.startswith("ResourceNotFound"):
            fix = "the secret does not exist: deploy the stacks again"
        elif "deleted" in detail or "deletion" in detail:
            restore = f"aws secretsmanager restore-secret --secret-id {result.get('arn')}"
            fix = f"the secret is scheduled for deletion: {restore}"
        elif result["outcome"] == "refused":
            fix = "its role needs secretsmanager:GetSecretValue on the secret (and the secret's policy too)"
        elif result["outcome"] == "missing":
            fix = (
                "its environment lacks the variable the template sets (deployed: deploy this version; "
                "locally: the local app gave it no value)"
            )
        elif result["outcome"] == "unreachable":
            fix = "no route to Secrets Manager from its VPC: an interface endpoint admitting it"
        else:
            fix = "the read failed in the function: its log says where"
        checks.append(Check("secret", name, False, f"cannot read {label}: {detail}", fix))
    if database := answer.get("database"):
        if database["outcome"] == "connected":
            checks.append(Check("database", name, True, f"logs in ({database['detail']})"))
        else:
            fix = (
                "the database's (or the proxy's) security group must admit the function's"
                if database["outcome"] == "unreachable"
                else "its login: the role's rds-db:connect or secret, and the CA it trusts "
                "(db_root_certificates for a direct connection)"
            )
            checks.append(Check("database", name, False, f"cannot log in: {database['detail']}", fix))
    return checks


def probes(app: App, target: Target, network: Network) -> Iterator[Check]:
    functions = app.functions()
    if not functions:
        yield Check("network", "-", True, "no function of the stacks is attached to a VPC")
        return
    networks = {f: network(app.templates, *f) for f in functions}

    def run(function: Id) -> list[Check]:
        found = networks[function]
        event = probe_event(app, target, function, dict(found.needed) if found else {})
        try:
            answer = target.invoke(function, event)
        except ProbeFailed as failed:
            return [
                Check(
                    "probe",
                    app.name(function),
                    False,
                    str(failed),
                    "deploy this version (an older one does not answer the probe), and read "
                    "the function's log",
                )
            ]
        return judge_probe(app, function, found, answer)

    with ThreadPoolExecutor(max_workers=min(8, len(functions))) as pool:
        for checks in pool.map(run, functions):
            yield from checks


def vpcs(app: App, target: Target) -> Iterator[Check]:
    for vpc_id in app.private_dns_vpcs():
        yield target.vpc_dns(vpc_id)


def proxies(app: App, target: Target) -> Iterator[Check]:
    found = app.proxies()
    if not found:
        yield Check("proxy", "-", True, "no RDS Proxy in the stacks: the functions connect to the database")
    for proxy in found:
        yield from target.proxy(proxy)


def mappings(app: App, target: Target) -> Iterator[Check]:
    by_function: dict[Id | None, list[tuple[Id, bool]]] = {}
    for mapping, function, enabled in app.mappings():
        by_function.setdefault(function, []).append((mapping, enabled))
    for function, declared in by_function.items():
        if function is None:
            continue
        states = target.mapping_states(function, [m for m, _ in declared])
        for mapping, enabled in declared:
            subject = f"{app.name(function)} {mapping[1]}"
            state, wanted = states.get(mapping), "Enabled" if enabled else "Disabled"
            if state == wanted:
                on_purpose = (
                    ""
                    if enabled
                    else " on purpose (the template creates it disabled: pipeline_enabled=false)"
                )
                yield Check("mapping", subject, True, f"{state}{on_purpose}")
            elif state is None:
                yield Check("mapping", subject, False, "not found", "deploy the pipeline stack again")
            elif state in TRANSITIONS:
                yield Check(
                    "mapping",
                    subject,
                    False,
                    f"{state} (the template says {wanted})",
                    "run doctor again in a minute",
                )
            elif enabled:
                yield Check(
                    "mapping",
                    subject,
                    False,
                    f"{state}, but the template says Enabled: nothing of its stream is processed",
                    "a rebuild in progress re-enables it when done; else enable it: "
                    + target.enable_hint(mapping),
                )
            else:
                yield Check(
                    "mapping",
                    subject,
                    False,
                    f"{state}, but the template pauses it (pipeline_enabled=false)",
                    "disable it, or deploy with pipeline_enabled=true",
                )


def topics(app: App, target: Target) -> Iterator[Check]:
    heard: dict[Topic, int] = {}
    for alarm, named in app.alarms().items():
        if not named:
            yield Check(
                "alarm",
                app.name(alarm),
                False,
                "has no action: nobody hears it",
                "give it the alarm topic as its action",
            )
        elif None in named:
            yield Check(
                "alarm",
                app.name(alarm),
                False,
                "an action that is not a topic of the stacks",
                "doctor checks the stacks' topics only: check it by hand",
            )
        for topic in named:
            if topic is not None:
                heard[topic] = heard.get(topic, 0) + 1
    for topic, count in heard.items():
        check = target.subscribers(topic)
        yield Check(
            check.kind, check.subject, check.ok, f"{check.message}; {count} alarm(s) act on it", check.fix
        )


def canary(app: App, target: Target, wait_s: float, poll_s: float = 2.0) -> Iterator[Check]:
    alarm = app.canary()
    if alarm is None:
        yield Check(
            "canary",
            "-",
            False,
            "the monitoring stack has no DoctorCanary alarm",
            "deploy this version of the stacks",
        )
        return
    name = target.alarm_name(alarm)
    since = datetime.now(UTC) - timedelta(seconds=2)  # a little early: clocks differ
    try:
        # OK first: an alarm left in ALARM would not act again (actions run on a change of state)
        target.set_alarm_state(alarm, "OK", "hybridsync doctor: the canary, from OK")
        target.set_alarm_state(alarm, "ALARM", "hybridsync doctor: the canary, to see a notification go out")
    except Exception as error:
        yield Check(
            "canary", name, False, f"cannot set its state: {error}", "may you call cloudwatch:SetAlarmState?"
        )
        return
    verdict: Check | None = None
    deadline = time.monotonic() + wait_s
    try:
        while verdict is None:
            for item in target.alarm_history(alarm, since):
                summary = str(item.get("HistorySummary", ""))
                if summary.startswith(SUCCEEDED) and _published_state(item) in (None, "ALARM"):
                    verdict = Check("canary", name, True, f"to ALARM and back: {summary}")
                elif summary.startswith(FAILED):
                    data = str(item.get("HistoryData", ""))[:300]
                    verdict = Check(
                        "canary",
                        name,
                        False,
                        f"{summary} {data}".strip(),
                        "the topic's policy must allow cloudwatch.amazonaws.com sns:Publish; "
                        "an encrypted topic's key must let CloudWatch use it",
                    )
                if verdict is not None:
                    break
            if verdict is None and time.monotonic() >= deadline:
                verdict = Check(
                    "canary",
                    name,
                    False,
                    f"no action in its history within {wait_s:g} s",
                    "read the alarm's history in the console; is the topic its ALARM action?",
                )
            elif verdict is None:
                time.sleep(poll_s)
    finally:
        try:
            target.set_alarm_state(alarm, "OK", "hybridsync doctor: the canary, back to OK")
        except Exception as error:  # said, not raised: the verdict above stands
            print(f"hybridsync doctor: could not set {name} back to OK: {error}", file=sys.stderr)
    yield verdict


def run_checks(
    app: App, target: Target, network: Network, *, canary_wait_s: float = 60, with_canary: bool = True
) -> Iterator[Check]:
    yield from probes(app, target, network)
    yield from vpcs(app, target)
    yield from proxies(app, target)
    yield from mappings(app, target)
    yield from topics(app, target)
    if with_canary:
        yield from canary(app, target, canary_wait_s)


def report(checks: Iterator[Check], as_json: bool, where: str, out: Any = None) -> int:
    """Each check's line as it comes (or one JSON document), a last summary line; 1 on any failure."""
    out = out or sys.stdout
    done: list[Check] = []
    for check in checks:
        done.append(check)
        if not as_json:
            print(check.line(), file=out, flush=True)
    failed = [c for c in done if not c.ok]
    if as_json:
        print(
            json.dumps({"where": where, "ok": not failed, "checks": [asdict(c) for c in done]}, indent=1),
            file=out,
        )
    else:
        kinds = ", ".join(sorted({c.kind for c in failed}))
        print(
            f"{len(done)} checks of {where}: " + (f"{len(failed)} FAILED ({kinds})" if failed else "all ok"),
            file=out,
        )
    return 1 if failed else 0


# --- the command ---------------------------------------------------------------------------------


def _published_state(item: dict[str, Any]) -> str | None:
    """The state an Action item's published message announced (None: the item does not say): the
    canary's verdict is its ALARM notification, not the OK one that went out first."""
    try:
        data = json.loads(str(item.get("HistoryData") or "{}"))
        return json.loads(data["publishedMessage"]).get("NewStateValue")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def add_doctor(cli: Commands) -> None:
    doctor = cli.add(
        "doctor",
        "check what the app needs, where it runs (one line per check, exit 1 on any failure): from inside "
        "each VPC function every service it needs, each secret it reads and its database login; the RDS "
        "Proxy's targets; every stream mapping enabled or paused on purpose; every alarm's topic heard by "
        "a confirmed subscription; a canary alarm driven to ALARM and back, its notification sent. "
        "Without --deployed: the local app of `hybridsync up`",
        "hybridsync doctor --deployed   (the first command after `cdk deploy`; locally: hybridsync doctor)",
        _doctor,
    )
    doctor.add_argument(
        "--deployed",
        nargs="?",
        const="",
        metavar="PREFIX",
        help="check the deployed stacks PREFIX-data, -database, -pipeline, -api, -monitoring "
        "(default PREFIX: cdk.json's context `prefix`) with the caller's AWS credentials",
    )
    doctor.add_argument("--json", action="store_true", help="every check as JSON ({where, ok, checks})")
    doctor.add_argument(
        "--canary-wait",
        type=float,
        default=60,
        metavar="S",
        help="how long the canary's notification may take (default 60 s)",
    )
    doctor.add_argument(
        "--no-canary",
        action="store_true",
        help="skip the canary (it sends one ALARM and one OK notification to the subscribers)",
    )
    doctor.add_argument("--state-dir", default=".local", help="the local app's state (default .local)")
    doctor.add_argument("--prefix", default="hybridsync", help="the local app's prefix (default hybridsync)")
    doctor.add_argument(
        "--assembly", default="cdk.out", help="the synthesized app `up` runs (default cdk.out)"
    )


def project_prefix() -> str:
    """The stacks' prefix of the project's cdk.json (its context `prefix`), else the default."""
    from hybridsync.cdk.context import SETTINGS
    from hybridsync.model import config

    root = config.project_root() or Path.cwd()
    cdk = root / "cdk.json"
    context = json.loads(cdk.read_text()).get("context", {}) if cdk.is_file() else {}
    return str(context.get("prefix") or SETTINGS["prefix"].default)


def local_environment(state_dir: Path) -> dict[str, str]:
    """The variables `hybridsync up` wrote for other shells (`.local/env`)."""
    path = state_dir / "env"
    if not path.is_file():
        raise SystemExit(
            f"hybridsync doctor: no {path}: is `hybridsync up` running (with --state-dir "
            f"{state_dir})? For the deployed stacks: hybridsync doctor --deployed"
        )
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def _doctor(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from hybridsync.runtime import aws
    from hybridsync.runtime import doctor as probe

    target: Any
    if args.deployed is not None:
        prefix = args.deployed or project_prefix()
        try:
            target = Deployed(prefix, aws.client)
        except (BotoCoreError, ClientError) as error:
            raise SystemExit(
                f"hybridsync doctor --deployed {prefix}: {error} (deployed? the right account and region?)"
            ) from None
        app = App(rules.Templates(target.templates))
    else:
        from hybridsync.local.template import synth_if_stale

        env = local_environment(Path(args.state_dir))
        if not env.get("LAMBDA_ENDPOINT"):
            raise SystemExit(f"hybridsync doctor: {args.state_dir}/env names no LAMBDA_ENDPOINT")
        try:  # one call first: a stopped app is one line, not a failure per check
            probe.client("lambda", env["LAMBDA_ENDPOINT"]).list_event_source_mappings()
        except BotoCoreError as error:
            raise SystemExit(
                f"hybridsync doctor: the local app's Lambda API ({env['LAMBDA_ENDPOINT']}) does not answer "
                f"({error}): is `hybridsync up` running (with --state-dir {args.state_dir})?"
            ) from None
        app = App(rules.Templates.load(synth_if_stale(Path(args.assembly), synth=False)))
        target = Local(app, env["LAMBDA_ENDPOINT"], args.prefix, Path(args.state_dir) / "notifications")
    checks = run_checks(
        app, target, rules.network, canary_wait_s=args.canary_wait, with_canary=not args.no_canary
    )
    return report(checks, args.json, target.where)
