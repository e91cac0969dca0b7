"""What the templates say to `hybridsync doctor`: the functions to probe and what each needs, the
mappings, the proxies, the alarms and their topics, the canary; and a check's verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hybridsync.truth.facts import CANARY, SECRET_TYPES
from hybridsync.truth.templates import Id, Templates, replica_regions

Topic = Id | str  # one of the stacks' topics, or a team's own by its ARN
STACKS = ("data", "database", "pipeline", "api", "monitoring")


@dataclass(frozen=True)
class Check:
    """One verdict: `kind` (network, secret, database, probe, proxy, mapping, replica, alarm, canary), what it
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
        self.templates: Templates = templates

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

    def replicated_tables(self) -> list[tuple[Id, list[str]]]:
        """Each global table with replicas in other Regions, and those Regions."""
        found = [(ident, replica_regions(table.get("Properties", {})))
                 for ident, table in self.templates.resources("AWS::DynamoDB::GlobalTable")]  # fmt: skip
        return [(ident, regions) for ident, regions in found if regions]

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
        """The monitoring stack's alarm doctor drives (by its construct id, CANARY)."""
        canary = CANARY
        return next((i for i in self.alarms() if self.construct(i) == canary), None)
