"""Grants of the pipeline's functions, nothing wider than what they touch: one prefix of a bucket,
one Kinesis stream (and its enhanced fan-out consumer), the item actions."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from cdk_nag import NagSuppressions


def grant_prefix(
    function: lambda_.IFunction,
    bucket: s3.IBucket,
    actions: list[str],
    prefix: str,
    *,
    listing: bool | str = False,
) -> None:
    """Object actions on one prefix of a bucket, nothing wider; `listing`: ListBucket on that prefix
    (or, "any", on the bucket: what Lambda's S3 destination asks for)."""
    prefix = f"{prefix.rstrip('/')}/*"
    function.add_to_role_policy(
        iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(prefix)])
    )
    sealed = {"s3:PutObject", "s3:GetObject"} & set(actions)
    if bucket.encryption_key is not None and sealed:  # a customer-managed key seals and opens the objects
        bucket.encryption_key.grant_encrypt_decrypt(function)
    if listing:
        conditions = None if listing == "any" else {"StringLike": {"s3:prefix": [prefix]}}
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"], resources=[bucket.bucket_arn], conditions=conditions
            )
        )
    assert function.role is not None
    escaped = prefix[:-2].replace("/", "\\/")
    NagSuppressions.add_resource_suppressions(
        function.role,
        [
            {
                "id": "AwsSolutions-IAM5",
                "reason": "Objects named at run time (review bodies by review and version, archives by "
                "table, failed batches by mapping and shard) under one prefix of one bucket; the grant "
                "is that prefix.",
                "applies_to": [{"regex": f"/^Resource::.*\\/{escaped}\\/\\*$/g"}],
            }
        ],
        apply_to_children=True,
    )


# What Lambda's poller reads a Kinesis stream with, and an enhanced fan-out consumer: Lambda guide,
# "Process Amazon Kinesis Data Streams records with Lambda" (execution role permissions)
KINESIS_READ = [
    "kinesis:DescribeStream",
    "kinesis:DescribeStreamSummary",
    "kinesis:ListShards",
    "kinesis:GetRecords",
    "kinesis:GetShardIterator",
]
FAN_OUT_READ = ["kinesis:SubscribeToShard", "kinesis:DescribeStreamConsumer"]


def grant_kinesis_read(
    function: lambda_.IFunction, stream: kinesis.IStream, consumer: kinesis.IStreamConsumer | None = None
) -> None:
    """What reading `stream` takes, nothing wider: the stream's read actions, an enhanced fan-out
    `consumer`'s subscription, and kms:Decrypt of a customer key (Kinesis guide, "Permissions to use
    user-generated KMS keys": a consumer needs kms:Decrypt)."""
    function.add_to_role_policy(iam.PolicyStatement(actions=KINESIS_READ, resources=[stream.stream_arn]))
    if consumer is not None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=FAN_OUT_READ, resources=[consumer.stream_consumer_arn])
        )
    if stream.encryption_key is not None:
        stream.encryption_key.grant_decrypt(function)


ITEM_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
]
