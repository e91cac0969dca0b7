"""The order of a deploy: a login's password is rotated only once the login exists."""

from __future__ import annotations

from typing import Any

from hybridsync.truth.facts import PAGES, SECRET_TYPES
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Id, Templates, listed, secrets_of


def order_rules(templates: Templates) -> list[Finding]:
    """A login's password is rotated only once the login exists: a schedule rotates at once when it
    is created, so the schedule of a secret whose login a deploy step makes (a custom resource whose
    properties name the secret: the Users step) must be in that step's stack and depend on it; and
    the schedule of a secret attached to a cluster (the admin's, whose login comes with it) must
    depend on an instance of it, in its stack: a cluster answers no connection before its writer
    instance is up, and CloudFormation makes the schedule beside the cluster: Secrets Manager
    rotates a secret at once when its schedule is made (RotationSchedule's RotateImmediatelyOnUpdate,
    true by default), and a cluster takes no login before it has an instance."""
    findings = []
    steps: dict[Id, set[Id]] = {}  # a deploy step -> the secrets whose logins it makes
    for ident, step in templates.resources("AWS::CloudFormation::CustomResource"):
        named = secrets_of(templates, ident[0], step.get("Properties", {}))
        if named := {n for n in named if (templates.get(n) or {}).get("Type") in SECRET_TYPES}:
            steps[ident] = named
    for ident, schedule in templates.resources("AWS::SecretsManager::RotationSchedule"):
        secrets = secrets_of(templates, ident[0], schedule["Properties"]["SecretId"])
        after = {(ident[0], d) for d in listed(schedule.get("DependsOn"))}
        instances = _instances_of(templates, ident[0], schedule["Properties"]["SecretId"], secrets)
        if instances and not any(i[0] != ident[0] or i in _depends_on(templates, ident) for i in instances):
            findings.append(
                Finding(
                    "rotation-order",
                    f"{ident[0]}/{ident[1]}",
                    "may rotate before "
                    f"{', '.join(sorted(f'{i[0]}/{i[1]}' for i in instances))} takes logins (a schedule "
                    "rotates at once when created, and a cluster without its instance answers no "
                    "connection): the first rotation fails; make the schedule depend on the writer instance",
                    PAGES["rotation-order"],
                )
            )
        for step, named in steps.items():
            if secrets & named and step not in after:
                findings.append(
                    Finding(
                        "rotation-order",
                        f"{ident[0]}/{ident[1]}",
                        f"may rotate before {step[0]}/{step[1]} makes its login (a schedule rotates at "
                        "once when created): the first rotation fails and leaves an AWSPENDING version; "
                        "schedule it in that stack, after that step",
                        PAGES["rotation-order"],
                    )
                )
    return findings


def _instances_of(templates: Templates, stack: str, secret_id: Any, secrets: set[Id]) -> set[Id]:
    """The DB instances whose logins a rotated secret holds: through its target attachment, the
    instance it names, or the instances of the cluster it names."""
    attachments = {a for a in templates.mentions(stack, secret_id)
                   if (templates.get(a) or {}).get("Type") == SECRET_TYPES[1]}  # fmt: skip
    for ident, attachment in templates.resources(SECRET_TYPES[1]):
        if templates.mentions(ident[0], attachment["Properties"]["SecretId"]) & secrets:
            attachments.add(ident)
    targets = {
        t
        for a in attachments
        for t in templates.mentions(a[0], (templates.get(a) or {}).get("Properties", {}).get("TargetId"))
    }
    found = {t for t in targets if (templates.get(t) or {}).get("Type") == "AWS::RDS::DBInstance"}
    for ident, instance in templates.resources("AWS::RDS::DBInstance"):
        if templates.mentions(ident[0], instance["Properties"].get("DBClusterIdentifier")) & targets:
            found.add(ident)
    return found


def _depends_on(templates: Templates, resource: Id) -> set[Id]:
    """Every resource of its stack CloudFormation creates before `resource`: its DependsOn and its
    references, followed through."""
    seen: set[Id] = set()
    todo = [resource]
    while todo:
        current = templates.get(todo.pop()) or {}
        stack = resource[0]
        direct = {(stack, d) for d in listed(current.get("DependsOn"))}
        direct |= {m for m in templates.mentions(stack, current.get("Properties", {})) if m[0] == stack}
        todo += list(direct - seen)
        seen |= direct
    return seen
