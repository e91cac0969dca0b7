"""The doctor's checks: each function's probe judged, the VPCs' DNS, the proxies, the mappings, the
topics and the canary, reported one line each."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from hybridsync.truth.doctor.inventory import App, Check, Topic
from hybridsync.truth.doctor.targets import ProbeFailed, Target
from hybridsync.truth.templates import Id

SUCCEEDED, FAILED = "Successfully executed action", "Failed to execute action"
# Lambda's transitional states: a mapping in one is neither running nor paused yet
TRANSITIONS = ("Creating", "Enabling", "Disabling", "Updating", "Deleting")


# --- the checks ----------------------------------------------------------------------------------

Network = Callable[[Any, str, str], Any]  # hybridsync.truth.network


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


def replicas(app: App, target: Target) -> Iterator[Check]:
    """Each replicated table's replicas (truth/doctor/replicas.py)."""
    for table, regions in app.replicated_tables():
        yield from target.replicas(table, regions)


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
                    else " on purpose (pipeline_enabled=false, or a standby consumes since a failover)"
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
                    f"{state}, but the template pauses it (pipeline_enabled=false, or a failover's fence)",
                    "disable it (--no-enabled), or, paused on purpose, deploy with pipeline_enabled=true",
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
    yield from replicas(app, target)
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


def _published_state(item: dict[str, Any]) -> str | None:
    """The state an Action item's published message announced (None: the item does not say): the
    canary's verdict is its ALARM notification, not the OK one that went out first."""
    try:
        data = json.loads(str(item.get("HistoryData") or "{}"))
        return json.loads(data["publishedMessage"]).get("NewStateValue")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
