"""What `-c freshness=realtime` promises, held in the templates."""

from __future__ import annotations

import re
from typing import Any

from hybridsync.truth.facts import PAGES
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Id, Templates

RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")


def freshness_rules(templates: Templates) -> list[Finding]:
    """What `-c freshness=realtime` promises (a change on the other side within a second) holds in
    the templates: no stream mapping of an engine consumer waits to fill a batch (a batching
    window delays every change by up to its length), and the outbox drain a schedule starts polls
    until the next run (OUTBOX_POLL_MS, a timeout past the schedule's period): a drain that runs
    once a minute makes a PostgreSQL change wait up to that minute."""
    findings = []

    def realtime(function: Id | None) -> dict[str, Any] | None:
        properties = (templates.get(function) or {}).get("Properties", {}) if function else {}
        variables = properties.get("Environment", {}).get("Variables", {})
        return properties if variables.get("HYBRIDSYNC_FRESHNESS") == "realtime" else None

    for ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        properties = mapping["Properties"]
        window = int(properties.get("MaximumBatchingWindowInSeconds") or 0)
        if window and realtime(templates.function_of(ident[0], properties.get("FunctionName"))):
            findings.append(Finding(
                "freshness", f"{ident[0]}/{ident[1]}",
                f"waits up to {window} s to fill a batch, under freshness=realtime (a change seen "
                "within a second): drop the window (`-c stream_batching_window_s` / "
                "`aggregate_batching_window_s` unset) or choose `-c freshness=economy`",
                PAGES["batching-window"]))  # fmt: skip
    for ident, rule in templates.resources("AWS::Events::Rule"):
        matched = RATE.fullmatch(rule.get("Properties", {}).get("ScheduleExpression", ""))
        for target in rule.get("Properties", {}).get("Targets", []):
            function = templates.function_of(ident[0], target.get("Arn"))
            properties = realtime(function)
            if (
                not matched
                or properties is None
                or not properties.get("Handler", "").endswith("sql_sync.handler")
            ):
                continue
            unit = {"minute": 60, "hour": 3600, "day": 86400}[matched[2].rstrip("s")]
            period = int(matched[1]) * unit
            polls = "OUTBOX_POLL_MS" in properties.get("Environment", {}).get("Variables", {})
            if properties.get("ReservedConcurrentExecutions") == 1:  # 0 or none: not held to one
                findings.append(Finding(
                    "freshness", f"{function[0]}/{function[1]}",  # type: ignore[index]
                    "reserves one concurrent run, under freshness=realtime: the next run is throttled "
                    "while the running one polls, so it cannot take over (leave "
                    "`sql_sync_reserved_concurrency` unset: 2)", PAGES["async-throttle"]))  # fmt: skip
            if not polls or int(properties.get("Timeout", 3)) <= period:
                findings.append(Finding(
                    "freshness", f"{function[0]}/{function[1]}",  # type: ignore[index]
                    f"the outbox drain runs every {period} s and does not poll until the next run "
                    "(OUTBOX_POLL_MS and a timeout past the period), under freshness=realtime: "
                    f"a PostgreSQL change may wait {period} s", PAGES["schedule-precision"]))  # fmt: skip
    return findings
