"""Customer-managed keys (KMS): every principal that uses a resource under a customer key may use
the key as AWS requires."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from hybridsync.truth.facts import PAGES
from hybridsync.truth.findings import Finding
from hybridsync.truth.policies import denials, described
from hybridsync.truth.templates import Id, Templates, home_replica, listed, secrets_of


def _key_of(templates: Templates, ident: Id, resource: dict[str, Any]) -> Any:
    """The customer-managed key a resource is encrypted with (None: none, or AWS's own)."""
    properties = resource.get("Properties", {})
    kind = resource["Type"]
    if kind == "AWS::SecretsManager::Secret":
        key = properties.get("KmsKeyId")
    elif kind == "AWS::SQS::Queue":
        key = properties.get("KmsMasterKeyId")
    elif kind == "AWS::S3::Bucket":
        rules = properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        key = next((r["ServerSideEncryptionByDefault"].get("KMSMasterKeyID") for r in rules), None)
    elif kind == "AWS::Kinesis::Stream":
        key = properties.get("StreamEncryption", {}).get("KeyId")
    elif kind in ("AWS::DynamoDB::GlobalTable", "AWS::DynamoDB::Table"):
        home = home_replica(properties)
        key = (home.get("SSESpecification") or properties.get("SSESpecification") or {}).get("KMSMasterKeyId")
    else:
        return None
    return None if key is None or "alias/aws/" in json.dumps(key) else key


# (resource type, an action on it) -> the KMS actions its caller needs, and the page that says so
KMS_NEEDS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("AWS::SecretsManager::Secret", "secretsmanager:GetSecretValue"): (("kms:Decrypt",), "secret-key"),
    ("AWS::SQS::Queue", "sqs:SendMessage"): (("kms:GenerateDataKey", "kms:Decrypt"), "sqs-key"),
    ("AWS::SQS::Queue", "sqs:ReceiveMessage"): (("kms:Decrypt",), "sqs-key"),
    ("AWS::S3::Bucket", "s3:PutObject"): (("kms:GenerateDataKey",), "s3-key"),
    ("AWS::S3::Bucket", "s3:GetObject"): (("kms:Decrypt",), "s3-key"),
    ("AWS::DynamoDB::GlobalTable", "dynamodb:GetRecords"): (("kms:Decrypt",), "stream-key"),
    ("AWS::Kinesis::Stream", "kinesis:GetRecords"): (("kms:Decrypt",), "kinesis-key"),
}


def _on_key(templates: Templates, key_text: str, key: set[Id], stack: str, named: Any) -> bool:
    """Whether a statement's Resource names a key: `*`, its ARN, or a reference to it."""
    named_key = templates.mentions(stack, named) & key
    return bool(key_text in json.dumps(named) or "*" in listed(named) or named_key)


def kms_rules(templates: Templates) -> list[Finding]:
    """Every principal that uses a customer-key resource may use the key as AWS requires: each role
    for what it reads and writes (its dead-letter queue and its mapping's failure destination
    included), a proxy for its secrets, a rotation for the secret it rotates."""
    return _key_use_rules(templates, _key_users(templates)) + _rotation_key_rules(templates)


# who (<stack>/<logical id>), its role, the role's (stack, statement)s, and the (action, resource)s it uses
KeyUser = tuple[str, Id, list[tuple[str, dict[str, Any]]], list[tuple[str, Id]]]


def _key_users(templates: Templates) -> list[KeyUser]:
    """Each function's and proxy's role, its statements, and what it reads and writes (a function's
    dead-letter queue and its mapping's failure destination included)."""
    users: list[KeyUser] = []
    for ident, function in templates.resources("AWS::Lambda::Function"):
        role = templates.role_of(ident)
        if role is None:
            continue
        statements = templates.policy_statements(role)
        touched = [
            (action, r)
            for stack, s in statements
            if s.get("Effect") == "Allow"
            for action in listed(s.get("Action"))
            for r in secrets_of(templates, stack, s.get("Resource"))
        ]
        queue = templates.target(
            ident[0], function["Properties"].get("DeadLetterConfig", {}).get("TargetArn")
        )
        if queue:
            touched.append(("sqs:SendMessage", queue))
        for m_ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
            if templates.function_of(m_ident[0], mapping["Properties"]["FunctionName"]) == ident:
                destination = mapping["Properties"].get("DestinationConfig", {}).get("OnFailure", {})
                touched += [
                    ("s3:PutObject", d)
                    for d in templates.mentions(m_ident[0], destination.get("Destination"))
                ]
        users.append((f"{ident[0]}/{ident[1]}", role, statements, touched))
    for ident, proxy in templates.resources("AWS::RDS::DBProxy"):
        role = templates.target(ident[0], proxy["Properties"]["RoleArn"])
        secrets = [
            ("secretsmanager:GetSecretValue", s)
            for auth in proxy["Properties"]["Auth"]
            for s in secrets_of(templates, ident[0], auth.get("SecretArn"))
        ]
        if role:
            users.append((f"{ident[0]}/{ident[1]}", role, templates.policy_statements(role), secrets))
    return users


def _key_use_rules(templates: Templates, users: list[KeyUser]) -> list[Finding]:
    """Each user's role may use the key of every customer-key resource it touches; no Deny takes it back."""
    findings = []
    for who, _, statements, touched in users:
        for action, resource_id in sorted(set(touched)):
            resource = templates.get(resource_id)
            if resource is None:
                continue
            needs = KMS_NEEDS.get((resource["Type"], action))
            key = _key_of(templates, resource_id, resource)
            if needs is None or key is None:
                continue
            key_text = templates.text(resource_id[0], key)
            on_key = functools.partial(_on_key, templates, key_text, templates.mentions(resource_id[0], key))
            for kms in needs[0]:
                granted = any(
                    s.get("Effect") == "Allow"
                    and any(re.fullmatch(a.replace("*", ".*"), kms, re.I) for a in listed(s.get("Action")))
                    and on_key(st, s.get("Resource"))
                    for st, s in statements
                )
                if denied := denials(statements, kms, covers=on_key):
                    findings.append(
                        Finding(
                            "kms-actions",
                            who,
                            f"{action} on {resource_id[0]}/{resource_id[1]} (under {key_text}) needs {kms} "
                            f"on that key, which its role denies ({described(denied)}): an explicit deny "
                            "overrides every allow",
                            PAGES["deny"],
                        )
                    )
                elif not granted:
                    findings.append(
                        Finding(
                            "kms-actions",
                            who,
                            f"{action} on {resource_id[0]}/{resource_id[1]} "
                            f"(under {key_text}) needs {kms} on that key, which its role lacks",
                            PAGES[needs[1]],
                        )
                    )
    return findings


def _rotation_key_rules(templates: Templates) -> list[Finding]:
    """A hosted rotation of a secret under a customer key names that key."""
    findings = []
    for ident, schedule in templates.resources("AWS::SecretsManager::RotationSchedule"):
        hosted = schedule["Properties"].get("HostedRotationLambda")
        secret = next(iter(secrets_of(templates, ident[0], schedule["Properties"]["SecretId"])), None)
        resource = templates.get(secret) if secret else None
        if (
            hosted is not None
            and resource
            and _key_of(templates, secret, resource)
            and not hosted.get("KmsKeyArn")
        ):  # type: ignore[arg-type]
            findings.append(
                Finding(
                    "kms-actions",
                    f"{ident[0]}/{ident[1]}",
                    "rotates a secret under a customer "
                    "key without naming it (HostedRotationLambda KmsKeyArn): the rotation cannot "
                    "decrypt it",
                    PAGES["secret-key"],
                )
            )
    return findings
