"""Many Regions: global tables (version 2019.11.21), each replica's stream and who reads it; and the
Aurora Global Database a standby's secondary cluster joins."""

from __future__ import annotations

import re

from hybridsync.truth.facts import PAGES, STANDBY
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Id, Templates, listed


def replica_rules(templates: Templates) -> list[Finding]:
    """A global table of more than one replica declares its streams (CloudFormation refuses it
    otherwise), with both images when the engine reads them; and no stream mapping reads a
    replica's stream by its ARN: the consumers run in the home Region, on `StreamArn` (the stack's
    own replica's stream), or every change would be written back and folded twice. A standby stack
    (cdk/standby.py) reads its own Region's replica, with every mapping disabled until a failover."""
    findings = []
    replicated: dict[str, str] = {}  # Region -> a table with a replica there
    for (stack, logical), table in templates.resources("AWS::DynamoDB::GlobalTable"):
        properties = table.get("Properties", {})
        regions = [r.get("Region") for r in listed(properties.get("Replicas"))]
        replicated |= {r: f"{stack}/{logical}" for r in regions if isinstance(r, str)}
        view = (properties.get("StreamSpecification") or {}).get("StreamViewType")
        if len(regions) > 1 and view != "NEW_AND_OLD_IMAGES":
            findings.append(Finding(
                "replica-stream", f"{stack}/{logical}",
                f"a global table of {len(regions)} replicas with stream view {view or 'none'}: "
                "CloudFormation requires StreamSpecification past one replica (multi-Region eventual "
                "consistency), and the engine reads both images",
                PAGES["replica-stream"],
            ))  # fmt: skip
    consuming: dict[str, list[str]] = {}  # side (home, or a standby's Region) -> its enabled mappings
    for (stack, logical), mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        source = mapping.get("Properties", {}).get("EventSourceArn")
        found = re.match(r"arn:aws[\w-]*:dynamodb:([\w-]+):", source) if isinstance(source, str) else None
        standby = templates.templates[stack].get("Metadata", {}).get(STANDBY)
        if mapping.get("Properties", {}).get("Enabled", True) is not False:
            consuming.setdefault(standby or "home", []).append(f"{stack}/{logical}")
        if found and found[1] in replicated and found[1] != standby:
            findings.append(Finding(
                "replica-consumer", f"{stack}/{logical}",
                f"reads the stream of a replica in {found[1]} ({replicated[found[1]]}): a replica's "
                "stream carries every change too, so its consumer would apply each change a second "
                "time; read StreamArn (the stack's own replica) in the home Region",
                PAGES["replica-consumer"],
            ))  # fmt: skip
    if len(consuming) > 1:  # a standby's, besides home's or another's: one side consumes at a time
        for side, mappings in sorted(consuming.items()):
            findings.extend(Finding(
                "replica-consumer", mapping,
                f"{' and '.join(sorted(consuming))} both consume the global tables' changes: each "
                f"would be applied twice; a standby's mappings deploy disabled, and only `hybridsync "
                "failover --deployed` enables them, after disabling home's",
                PAGES["replica-consumer"],
            ) for mapping in mappings if side != "home")  # fmt: skip
    return findings


def global_database_rules(templates: Templates) -> list[Finding]:
    """A secondary cluster (`AWS::RDS::DBCluster` with `GlobalClusterIdentifier`, cdk/standby.py)
    joins a global database some stack declares, names no master login (RDS refuses one for "cross
    region replication cluster": the logins are the primary's), names the key of its Region when
    encrypted (CreateDBCluster's KmsKeyId) and runs the primary's engine and engine version (Aurora
    guide, "Adding an AWS Region to an Aurora global database")."""
    findings: list[Finding] = []
    primaries: dict[object, dict] = {}  # a global database's identifier -> its primary's properties
    for (stack, _), joined in templates.resources("AWS::RDS::GlobalCluster"):
        properties = joined.get("Properties", {})
        source = _referenced(stack, properties.get("SourceDBClusterIdentifier"))
        primary = (templates.get(source) if source else None) or {}
        primaries[properties.get("GlobalClusterIdentifier")] = primary.get("Properties", {})
    for (stack, logical), cluster in templates.resources("AWS::RDS::DBCluster"):
        properties = cluster.get("Properties", {})
        if "GlobalClusterIdentifier" not in properties:
            continue
        joins = properties["GlobalClusterIdentifier"]
        wrong = [f"it names {k}" for k in ("MasterUsername", "MasterUserPassword", "ManageMasterUserPassword")
                 if k in properties]  # fmt: skip
        if properties.get("StorageEncrypted") and "KmsKeyId" not in properties:
            wrong.append(
                "it is encrypted and names no KmsKeyId, which RDS requires of a cross-Region replica"
            )
        if joins not in primaries:
            wrong.append(f"no stack declares the global database {joins!r} it joins")
        else:
            primary, engine = primaries[joins], ("Engine", "EngineVersion")
            wrong += [f"its {k} {properties.get(k)!r} is not the primary's {primary.get(k)!r}"
                      for k in engine if properties.get(k) != primary.get(k)]  # fmt: skip
        findings.extend(Finding("aurora-secondary", f"{stack}/{logical}",
                                f"a secondary cluster of an Aurora Global Database: {problem}",
                                PAGES["aurora-secondary"]) for problem in wrong)  # fmt: skip
    return findings


def _referenced(stack: str, value: object) -> Id | None:
    """The resource a value refers to with a `Ref`, however deep (an ARN joined from one)."""
    if isinstance(value, dict):
        if isinstance(ref := value.get("Ref"), str) and not ref.startswith("AWS::"):
            return (stack, ref)
        values: list[object] = list(value.values())
    elif isinstance(value, list):
        values = value
    else:
        return None
    return next((found for v in values if (found := _referenced(stack, v))), None)
