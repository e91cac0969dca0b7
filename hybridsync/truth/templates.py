"""The templates of one synth, read together: references across stacks resolve to the resource
they name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Id = tuple[str, str]  # (stack, logical id)


class Templates:
    """Every stack's template of one synth; references across stacks (`Fn::ImportValue` of CDK's
    exports) resolve to the resource they name."""

    def __init__(self, templates: dict[str, dict[str, Any]]):
        self.templates = templates
        self.exports: dict[str, tuple[str, Any]] = {}
        for stack, template in templates.items():
            for output in template.get("Outputs", {}).values():
                name = output.get("Export", {}).get("Name")
                if isinstance(name, str):
                    self.exports[name] = (stack, output["Value"])

    @classmethod
    def load(cls, directory: Path) -> Templates:
        """A cloud assembly folder (`cdk.out`)."""
        return cls(
            {
                p.name.removesuffix(".template.json"): json.loads(p.read_text())
                for p in sorted(Path(directory).glob("*.template.json"))
            }
        )

    def resources(self, *kinds: str) -> Iterator[tuple[Id, dict[str, Any]]]:
        for stack, template in self.templates.items():
            for logical, resource in template.get("Resources", {}).items():
                if resource.get("Type") in kinds:
                    yield (stack, logical), resource

    def get(self, ident: Id) -> dict[str, Any] | None:
        return self.templates.get(ident[0], {}).get("Resources", {}).get(ident[1])

    def target(self, stack: str, value: Any) -> Id | None:
        """The resource a Ref, a GetAtt or an import of either names (None: a literal, or no resource)."""
        if isinstance(value, dict):
            if "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
                return (stack, value["Ref"])
            if "Fn::GetAtt" in value:
                return (stack, value["Fn::GetAtt"][0])
            if "Fn::ImportValue" in value and value["Fn::ImportValue"] in self.exports:
                stack, exported = self.exports[value["Fn::ImportValue"]]  # a Join of a list attribute, too
                return self.target(stack, exported) or next(iter(self.mentions(stack, exported)), None)
        return None

    def mentions(self, stack: str, value: Any) -> set[Id]:
        """Every resource a value refers to, however deep (a Join of an ARN and a path included)."""
        found: set[Id] = set()
        if isinstance(value, dict):
            if (hit := self.target(stack, value)) is not None:
                found.add(hit)
            else:
                for item in value.values():
                    found |= self.mentions(stack, item)
        elif isinstance(value, list):
            for item in value:
                found |= self.mentions(stack, item)
        return found

    def text(self, stack: str, value: Any) -> str:
        """A value as text, references kept as `<stack/logical>` and the region as `<region>`."""
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            if "Fn::Join" in value:
                separator, parts = value["Fn::Join"]
                return separator.join(self.text(stack, p) for p in parts)
            if value.get("Ref") == "AWS::Region":
                return "<region>"
            if (hit := self.target(stack, value)) is not None:
                return f"<{hit[0]}/{hit[1]}>"
        return json.dumps(value)

    def policy_statements(self, role: Id) -> list[tuple[str, dict[str, Any]]]:
        """(stack, statement) of every identity-based policy of a role: inline and attached."""
        found = []
        resource = self.get(role) or {}
        for policy in resource.get("Properties", {}).get("Policies", []):
            found += [(role[0], s) for s in listed(policy["PolicyDocument"].get("Statement"))]
        for ident, policy in self.resources("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            roles = {self.target(ident[0], r) for r in policy["Properties"].get("Roles", [])}
            if role in roles:
                found += [(ident[0], s) for s in listed(policy["Properties"]["PolicyDocument"]["Statement"])]
        return found

    def role_of(self, function: Id) -> Id | None:
        resource = self.get(function) or {}
        return self.target(function[0], resource.get("Properties", {}).get("Role"))

    def function_of(self, stack: str, value: Any) -> Id | None:
        """The function a value names: the function itself, or an alias of it (whole, or its name
        cut out of the alias's ARN, as CDK writes a mapping's `FunctionName`)."""
        ident = self.target(stack, value) or next(iter(self.mentions(stack, value)), None)
        resource = self.get(ident) if ident else None
        if resource and resource["Type"] == "AWS::Lambda::Alias":
            return self.target(ident[0], resource["Properties"]["FunctionName"])  # type: ignore[index]
        return ident


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def home_replica(properties: dict[str, Any]) -> dict[str, Any]:
    """A table's replica in the Region its stack deploys to (`AWS::DynamoDB::GlobalTable`'s
    `Replicas`; {} for a plain table): the one whose Region is the stack's own (`Ref: AWS::Region`,
    a Region-agnostic stack's only replica), else the last (TableV2 renders a pinned stack's own
    replica after the others)."""
    replicas = listed(properties.get("Replicas"))
    own = [r for r in replicas if r.get("Region") == {"Ref": "AWS::Region"}]
    return (own or replicas or [{}])[-1]


def replica_regions(properties: dict[str, Any]) -> list[str]:
    """The Regions of a table's other replicas, as its template names them (none for a plain table)."""
    home = home_replica(properties)
    return [
        r["Region"]
        for r in listed(properties.get("Replicas"))
        if r is not home and isinstance(r.get("Region"), str)
    ]


def secrets_of(templates: Templates, stack: str, value: Any) -> set[Id]:
    """The secrets a value names, through a target attachment (RDS's secret of a cluster)."""
    found = set()
    for ident in templates.mentions(stack, value):
        resource = templates.get(ident) or {}
        if resource.get("Type") == "AWS::SecretsManager::SecretTargetAttachment":
            found |= templates.mentions(ident[0], resource["Properties"]["SecretId"])
        else:
            found.add(ident)
    return found
