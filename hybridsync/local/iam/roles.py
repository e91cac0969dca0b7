"""Each function's execution role as the templates grant it, in local ARNs: its statements, the
customer keys its calls are checked for, and the VPC routes it has (as the deploy rules read the
templates), for the worker's checks (iam/policies.py, vpc/network.py) and the control plane's."""

from __future__ import annotations

from typing import Any

from hybridsync import truth as rules
from hybridsync.local.account import Account
from hybridsync.local.iam import policies
from hybridsync.local.postgres.logins import Logins
from hybridsync.local.template import Resource
from hybridsync.truth import home_replica


class Roles:
    """The execution roles of the app's functions."""

    def __init__(self, account: Account, logins: Logins) -> None:
        self.account, self.logins = account, logins
        self._rule_templates: Any = None  # the deploy rules' view of the templates (network())
        self._customer_keys: dict[str, str] | None = None  # resource -> its customer key (keys_for())

    def role(self, function: Resource) -> tuple[str, list[dict[str, Any]]]:
        """The function's execution role: its name and its policies' statements, in local ARNs (and
        `rds-db:connect` as a login read as its secret: local/postgres/logins.py)."""
        name, statements = policies.role_statements(self.account.assembly, function)
        return name, self.logins.stand_in(statements)

    def network(self, function: Resource) -> dict[str, Any] | None:
        """What a VPC-attached function reaches, as the deploy rules read the templates (None: not in
        a VPC, so every public endpoint), for local/vpc/network.py."""
        if self._rule_templates is None:
            self._rule_templates = rules.Templates(self.account.assembly.templates)
        found = rules.network(self._rule_templates, function.stack, function.logical_id)
        if found is None:
            return None
        return {"function": found.function, "region": self.account.region,
                "reachable": dict(found.reachable), "needed": dict(found.needed)}  # fmt: skip

    def customer_keys(self) -> dict[str, str]:
        """Every resource under a customer-managed key in the templates -> that key: secrets (by local
        ARN and name), queues and buckets (by ARN). An AWS-managed key (`alias/aws/...`) is left out:
        its policy lets its service's users use it, so the caller needs nothing of its own. A DynamoDB
        table's items need nothing of the caller (DynamoDB's grant), its stream's records kms:Decrypt
        (iam/policies.py KMS_ACTIONS): tables by their stream's ARN."""
        a, found = self.account.assembly, {}

        def customer(stack: str, value: Any) -> str | None:
            key = a.resolve(stack, value) if value is not None else None
            return (
                str(key)
                if key and not str(key).startswith("alias/aws/") and ":alias/aws/" not in str(key)
                else None
            )

        for secret in a.resources("AWS::SecretsManager::Secret"):
            arn = a.resolve(secret.stack, {"Ref": secret.logical_id})
            if arn and (key := customer(secret.stack, secret.properties.get("KmsKeyId"))):
                found[arn] = found[f"{self.account.prefix}-{secret.construct}"] = key
        for queue in a.resources("AWS::SQS::Queue"):
            if key := customer(queue.stack, queue.properties.get("KmsMasterKeyId")):
                found[a.resolve(queue.stack, {"Fn::GetAtt": [queue.logical_id, "Arn"]})] = key
        for bucket in a.resources("AWS::S3::Bucket"):
            rules = bucket.properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
            for rule in rules:
                default = rule.get("ServerSideEncryptionByDefault", {})
                if default.get("SSEAlgorithm") in ("aws:kms", "aws:kms:dsse") and (
                    key := customer(bucket.stack, default.get("KMSMasterKeyID"))
                ):
                    found[f"arn:aws:s3:::{self.account.buckets[bucket.construct]}"] = key
        for table in self.account.table_resources():  # their streams' records
            sse = home_replica(table.properties).get("SSESpecification") or table.properties.get(
                "SSESpecification", {}
            )
            stream = a.resolve(table.stack, {"Fn::GetAtt": [table.logical_id, "StreamArn"]})
            if stream and (key := customer(table.stack, sse.get("KMSMasterKeyId"))):
                found[str(stream)] = key
        return found

    def keys_for(self, function: Resource) -> dict[str, str]:
        """The customer keys a function's calls are checked for. A login's secret the function reads
        only because the local app stands it in for RDS Proxy's IAM login (local/postgres/logins.py) is left
        out: in AWS the function never reads it, so it needs no kms:Decrypt on its key."""
        keys = dict(self._customer_keys if self._customer_keys is not None else self.customer_keys())
        self._customer_keys = keys
        raw = policies.role_statements(self.account.assembly, function)[1]
        for arn in self.logins.by_user.values():
            if arn in keys and not policies.allowed(raw, "secretsmanager:GetSecretValue", arn, {}):
                keys = {k: v for k, v in keys.items() if k != arn}
        return keys

    def may(self, function: Resource, action: str, resource: str) -> bool:
        """Whether the function's role allows `action` on `resource` (always, with IAM off)."""
        return not self.account.iam or policies.allowed(self.role(function)[1], action, resource, {})
