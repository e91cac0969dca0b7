"""The deploy truth: what the synthesized templates must hold to work in AWS and no local run can show
(resource and key policies, routes out of a VPC, customer keys, the CA a database presents, the order
of a deploy), checked on every synth. Each rule states a fact of AWS's and cites the page it comes
from; a project's app.py (what `cdk synth` runs: `synth_or_exit`) refuses templates that break one, naming the
resource, and the infra tier breaks each rule on purpose to see it refuse. The local app reads the same
facts (`network`) to refuse what AWS would refuse, and `hybridsync doctor` checks what the templates
say where the app runs.

Rules work on the templates of one synth together (`Templates`), so a function in the pipeline stack is
judged with the endpoints of the database stack and the topic of the monitoring stack. One module per
fact: `facts` (AWS's, with their pages), `templates` (reading them), `policies`, `routes` (network
reachability), `topics` and `alarms`, `keys` (KMS), `certificates`, `order`, `readers` (stream
readers), `freshness`; `ruleset` runs them all. Never shipped to Lambda."""

from hybridsync.truth.alarms import NAMED_BY, engine_metrics, metric_rules
from hybridsync.truth.certificates import trust_rules
from hybridsync.truth.facts import (
    CANARY,
    DOCS,
    ENDPOINT_SERVICES,
    ENDPOINT_VARIABLE,
    FAN_OUT_CONSUMERS,
    NO_PRIVATE_DNS,
    PAGES,
    PLATFORM_PREFIXES,
    PUBLISHED,
    PUBLISHED_VALUES,
    SECRET_TYPES,
    SERVICE_OF_PREFIX,
    SHARED_READERS,
    STREAM_READ,
    STREAM_READERS,
    VALUE_PAGES,
)
from hybridsync.truth.findings import DeployTruthError, Finding
from hybridsync.truth.freshness import RATE, freshness_rules
from hybridsync.truth.keys import KMS_NEEDS, kms_rules
from hybridsync.truth.order import order_rules
from hybridsync.truth.policies import allows, denials
from hybridsync.truth.readers import kinesis_reader_rules, reader_rules
from hybridsync.truth.replicas import replica_rules
from hybridsync.truth.routes import Network, needed_services, network, network_rules, reach
from hybridsync.truth.ruleset import RULES, check, enforce
from hybridsync.truth.templates import Id, Templates, home_replica, listed, replica_regions, secrets_of
from hybridsync.truth.topics import topic_rules

__all__ = [
    "CANARY",
    "DOCS",
    "ENDPOINT_SERVICES",
    "ENDPOINT_VARIABLE",
    "FAN_OUT_CONSUMERS",
    "KMS_NEEDS",
    "NAMED_BY",
    "NO_PRIVATE_DNS",
    "PAGES",
    "PLATFORM_PREFIXES",
    "PUBLISHED",
    "PUBLISHED_VALUES",
    "RATE",
    "RULES",
    "SECRET_TYPES",
    "SERVICE_OF_PREFIX",
    "SHARED_READERS",
    "STREAM_READ",
    "STREAM_READERS",
    "VALUE_PAGES",
    "DeployTruthError",
    "Finding",
    "Id",
    "Network",
    "Templates",
    "allows",
    "check",
    "denials",
    "enforce",
    "engine_metrics",
    "freshness_rules",
    "home_replica",
    "kinesis_reader_rules",
    "kms_rules",
    "listed",
    "metric_rules",
    "needed_services",
    "network",
    "network_rules",
    "order_rules",
    "reach",
    "reader_rules",
    "replica_regions",
    "replica_rules",
    "secrets_of",
    "topic_rules",
    "trust_rules",
]
