"""Every alarm action reaches its topic: the topic's policy and its key let CloudWatch publish."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from hybridsync.truth.facts import PAGES
from hybridsync.truth.findings import Finding
from hybridsync.truth.policies import allows, denials, described, may_name, principal_services
from hybridsync.truth.templates import Id, Templates, listed


def _alarm_actions(templates: Templates) -> Iterator[tuple[Id, Id | None, Any]]:
    for ident, alarm in templates.resources("AWS::CloudWatch::Alarm"):
        properties = alarm["Properties"]
        for action in listed(properties.get("AlarmActions")) + listed(properties.get("OKActions")):
            yield ident, templates.target(ident[0], action), action


def topic_rules(templates: Templates) -> list[Finding]:
    """Every alarm action reaches its topic: a topic policy replaces SNS's default one, so it must let
    CloudWatch publish; an encrypted topic's key lets CloudWatch use it, and is never AWS's own; and
    no Deny in either takes it back (an explicit deny overrides every allow)."""
    findings, seen = [], set()
    for _, topic, _ in _alarm_actions(templates):
        if topic is None or topic in seen:
            continue  # a topic of yours (`alarm_topic_arn`): `hybridsync doctor --deployed` checks it
        seen.add(topic)
        findings += _topic_policy_rules(templates, topic) + _topic_key_rules(templates, topic)
    return findings


def _topic_policy_rules(templates: Templates, topic: Id) -> list[Finding]:
    """The topic's policies let CloudWatch publish, under a condition, and no Deny takes it back."""
    findings: list[Finding] = []
    where = f"{topic[0]}/{topic[1]}"
    for ident, policy in templates.resources("AWS::SNS::TopicPolicy"):
        if topic not in templates.mentions(ident[0], policy["Properties"]["Topics"]):
            continue
        statements = [(ident[0], s) for s in listed(policy["Properties"]["PolicyDocument"]["Statement"])]
        publishers = [s for _, s in statements if "cloudwatch.amazonaws.com" in principal_services(s)]
        if denied := denials(
            statements,
            "sns:Publish",
            "cloudwatch.amazonaws.com",
            functools.partial(may_name, templates, resource=topic),
        ):
            findings.append(
                Finding(
                    "alarm-topic-policy",
                    where,
                    f"its topic policy denies cloudwatch.amazonaws.com sns:Publish ({described(denied)}), "
                    "which no Allow overrides: an alarm may fail to notify",
                    PAGES["deny"],
                )
            )
        if not allows([(ident[0], s) for s in publishers], "sns:Publish"):
            findings.append(
                Finding(
                    "alarm-topic-policy",
                    where,
                    "its topic policy lets no cloudwatch.amazonaws.com sns:Publish: no alarm can notify",
                    PAGES["topic"],
                )
            )
        elif not all(s.get("Condition") for s in publishers):
            findings.append(
                Finding(
                    "alarm-topic-policy",
                    where,
                    "CloudWatch may publish without an "
                    "aws:SourceAccount or aws:SourceArn condition (confused deputy)",
                    PAGES["topic"],
                )
            )
    return findings


def _topic_key_rules(templates: Templates, topic: Id) -> list[Finding]:
    """An encrypted topic's key is a customer key of the templates whose policy lets CloudWatch use it."""
    findings: list[Finding] = []
    where = f"{topic[0]}/{topic[1]}"
    key = (templates.get(topic) or {}).get("Properties", {}).get("KmsMasterKeyId")
    if key is None:
        return findings
    key_id = templates.target(topic[0], key)
    resource = templates.get(key_id) if key_id else None
    if resource is None or resource["Type"] != "AWS::KMS::Key":
        shown = templates.text(topic[0], key)
        reason = (
            "the AWS-managed SNS key, which CloudWatch cannot use"
            if "alias/aws/" in shown
            else f"key {shown}, whose policy is not in the templates (CloudWatch's use of it cannot be shown)"
        )
        findings.append(Finding("alarm-topic-key", where, f"encrypted with {reason}", PAGES["topic-key"]))
        return findings
    statements = [(key_id[0], s) for s in listed(resource["Properties"]["KeyPolicy"]["Statement"])]  # type: ignore[index]
    cloudwatch = [(st, s) for st, s in statements if "cloudwatch.amazonaws.com" in principal_services(s)]
    for needed in ("kms:Decrypt", "kms:GenerateDataKey"):
        if denied := denials(statements, needed, "cloudwatch.amazonaws.com"):  # a key policy: its key
            findings.append(
                Finding(
                    "alarm-topic-key",
                    where,
                    f"its key's policy denies cloudwatch.amazonaws.com {needed} ({described(denied)})",
                    PAGES["deny"],
                )
            )
        elif not allows(cloudwatch, needed):
            findings.append(
                Finding(
                    "alarm-topic-key",
                    where,
                    f"its key's policy does not let cloudwatch.amazonaws.com {needed}",
                    PAGES["topic-key"],
                )
            )
    return findings
