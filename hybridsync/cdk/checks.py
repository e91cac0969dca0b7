"""The checkov findings that do not apply to this app, each skipped where it holds and with its reason
(checkov reads `Metadata.checkov.skip` from the synthesized templates). Everything else is fixed
in the stacks; the infra tests run checkov and cfn-lint and accept no other finding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsii
from aws_cdk import CfnResource, IAspect
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from constructs import IConstruct

# (check, the L1 resources it is skipped on, why it does not apply)
SKIPS: list[tuple[str, Callable[[Any], bool], str]] = [
    ("CKV_AWS_173", lambda r: isinstance(r, lambda_.CfnFunction),
     "The environment holds table, bucket and secret names and endpoints, never a secret: functions "
     "log in to PostgreSQL with IAM tokens made at run time, or read their role's password from "
     "Secrets Manager (a test greps every log line of a run for it). Lambda encrypts environment "
     "variables at rest with its service key."),
    ("CKV_AWS_117", lambda r: isinstance(r, lambda_.CfnFunction) and r.vpc_config is None,
     "This function reaches only DynamoDB, S3 and CloudWatch through their public endpoints with "
     "IAM; only the functions that talk to PostgreSQL run in the VPC."),
    ("CKV_AWS_116", lambda r: isinstance(r, lambda_.CfnFunction) and r.dead_letter_config is None,
     "Never invoked asynchronously: a stream mapping (failed batches go to its S3 failure destination), "
     "the HTTP API or a deploy-time custom resource (both synchronous); the scheduled functions "
     "have a dead-letter queue."),
    ("CKV_AWS_115", lambda r: isinstance(r, lambda_.CfnFunction) and r.reserved_concurrent_executions is None,
     "Its concurrency is bounded by its trigger: one invocation per stream shard (parallelization "
     "factor 1), one scheduled run, or one deploy. Reserving more would take from the account's "
     "unreserved pool (10 on new accounts); the API and the outbox drain, which can load "
     "PostgreSQL, have reserved concurrency."),
    ("CKV_AWS_158", lambda r: isinstance(r, logs.CfnLogGroup),
     "CloudWatch Logs encrypts log data at rest; the logs hold no secrets or item bodies (a test "
     "checks), so a customer-managed key would add cost and key-policy coupling for nothing."),
    ("CKV_AWS_149", lambda r: isinstance(r, secretsmanager.CfnSecret) and r.kms_key_id is None,
     "Encrypted with the account's Secrets Manager key; only RDS Proxy, the rotation and the one "
     "function that sets the logins may read it (IAM). `-c kms_key_arn=` encrypts it with yours."),
    ("CKV_AWS_18", lambda r: isinstance(r, s3.CfnBucket),
     "Review bodies, archives and failed batches are written and read only by the app's functions "
     "and stream mappings, whose calls CloudTrail data events can record; server access logs would "
     "need a bucket of their own."),
    ("CKV_AWS_26", lambda r: isinstance(r, sns.CfnTopic) and r.kms_master_key_id is None,
     "The alarm topic: CloudWatch cannot publish to a topic encrypted with the AWS-managed SNS key "
     "(`-c kms_key_arn=` encrypts it with yours), and an alarm message carries names and thresholds."),
]  # fmt: skip


def skip(resource: CfnResource, check: str, reason: str) -> None:
    metadata = resource.get_metadata("checkov") or {}
    skips = [s for s in metadata.get("skip", []) if s["id"] != check]
    resource.add_metadata("checkov", {**metadata, "skip": [*skips, {"id": check, "comment": reason}]})


@jsii.implements(IAspect)
class CheckovSkips:
    """Adds the table's skips to every resource they hold for, CDK's own included."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource):
            for check, applies, reason in SKIPS:
                if applies(node):
                    skip(node, check, reason)
