"""Every rule of the deploy truth, run together on the templates of one synth."""

from __future__ import annotations

from hybridsync.truth.alarms import metric_rules
from hybridsync.truth.certificates import trust_rules
from hybridsync.truth.findings import DeployTruthError, Finding
from hybridsync.truth.freshness import freshness_rules
from hybridsync.truth.keys import kms_rules
from hybridsync.truth.order import order_rules
from hybridsync.truth.readers import kinesis_reader_rules, reader_rules
from hybridsync.truth.replicas import global_database_rules, replica_rules
from hybridsync.truth.routes import network_rules
from hybridsync.truth.templates import Templates
from hybridsync.truth.topics import topic_rules

RULES = (topic_rules, metric_rules, network_rules, kms_rules, trust_rules, order_rules, reader_rules,
         kinesis_reader_rules, freshness_rules, replica_rules, global_database_rules)  # fmt: skip


def check(templates: Templates) -> list[Finding]:
    """Every finding of every rule."""
    return [finding for rule in RULES for finding in rule(templates)]


def enforce(templates: Templates) -> None:
    """Raise DeployTruthError with every finding, if any."""
    if findings := check(templates):
        raise DeployTruthError(findings)
