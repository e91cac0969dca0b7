"""The local IAM check: what a call asks for, and how a role's statements answer it."""

from __future__ import annotations

import json

import pytest

from hybridsync.local.iam import policies as iam

TABLES = "arn:aws:dynamodb:us-east-1:123456789012:table/"


def asked(service, operation, **params):
    return iam.requested(service, operation, params, "us-east-1", "123456789012")


def test_a_transaction_needs_the_action_of_each_item_it_writes():
    items = [{"Put": {"TableName": "main"}}, {"Update": {"TableName": "main"}},
             {"ConditionCheck": {"TableName": "other"}}]  # fmt: skip
    assert asked("dynamodb", "TransactWriteItems", TransactItems=items) == [
        ("dynamodb:PutItem", TABLES + "main", {}),
        ("dynamodb:UpdateItem", TABLES + "main", {}),
        ("dynamodb:ConditionCheckItem", TABLES + "other", {}),
    ]


def test_a_query_on_an_index_asks_for_the_index_and_a_batch_for_each_table():
    assert asked("dynamodb", "Query", TableName="main", IndexName="Rankings") == [
        ("dynamodb:Query", TABLES + "main/index/Rankings", {})
    ]
    assert [r[1] for r in asked("dynamodb", "BatchGetItem", RequestItems={"a": {}, "b": {}})] == [
        TABLES + "a", TABLES + "b"]  # fmt: skip
    assert asked("dynamodb", "ListTables") == [("dynamodb:ListTables", "*", {})]


def test_exports_ask_for_their_table_or_themselves_and_the_listing_for_anything():
    table = TABLES + "events-2026-11-01"
    assert asked("dynamodb", "ExportTableToPointInTime", TableArn=table, S3Bucket="b") == [
        ("dynamodb:ExportTableToPointInTime", table, {})]  # fmt: skip
    assert asked("dynamodb", "DescribeExport", ExportArn=f"{table}/export/1") == [
        ("dynamodb:DescribeExport", f"{table}/export/1", {})]  # fmt: skip
    assert asked("dynamodb", "ListExports", TableArn=table) == [("dynamodb:ListExports", "*", {})]


def test_s3_objects_and_listing_with_its_prefix():
    assert asked("s3", "HeadObject", Bucket="b", Key="reviews/1.gz") == [
        ("s3:GetObject", "arn:aws:s3:::b/reviews/1.gz", {})
    ]
    assert asked("s3", "ListObjectsV2", Bucket="b", Prefix="reviews/") == [
        ("s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "reviews/"})
    ]


def test_allow_deny_and_conditions():
    grant = {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:Query"], "Resource": TABLES + "main"}
    listing = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
               "Condition": {"StringLike": {"s3:prefix": ["reviews/*"]}}}  # fmt: skip
    assert iam.allowed([grant], "dynamodb:GetItem", TABLES + "main", {})
    assert not iam.allowed([grant], "dynamodb:PutItem", TABLES + "main", {})  # implicitly denied
    assert not iam.allowed(
        [grant], "dynamodb:Query", TABLES + "main/index/Rankings", {}
    )  # the index is its own
    assert iam.allowed(
        [grant | {"Resource": TABLES + "main*"}], "dynamodb:Query", TABLES + "main/index/X", {}
    )
    assert iam.allowed([listing], "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "reviews/p1/"})
    assert not iam.allowed([listing], "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "timeseries/"})
    deny = {"Effect": "Deny", "NotAction": "dynamodb:GetItem", "Resource": "*"}
    assert iam.allowed([grant, deny], "dynamodb:GetItem", TABLES + "main", {})
    assert not iam.allowed([grant, deny], "dynamodb:Query", TABLES + "main", {})  # an explicit Deny wins
    unknown = grant | {"Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}
    assert not iam.allowed([unknown], "dynamodb:GetItem", TABLES + "main", {})  # not evaluated here: no Allow


def test_the_denial_reads_as_aws_writes_it():
    assert iam.denial("Role", "Api", "123456789012", "dynamodb:PutItem", TABLES + "main") == (
        "User: arn:aws:sts::123456789012:assumed-role/Role/Api is not authorized to perform: "
        f"dynamodb:PutItem on resource: {TABLES}main because no identity-based policy allows the "
        "dynamodb:PutItem action"
    )


# --- conditions of resource policies, and the KMS actions of a call ------------------------------

ALARM = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:hybridsync-DeadLetters"
TOPIC = "arn:aws:sns:us-east-1:123456789012:hybridsync-AlarmTopic"
KEY = "arn:aws:kms:eu-west-1:123456789012:key/0b0b0b0b-1111-2222-3333-444444444444"
CLOUDWATCH = {"aws:SourceAccount": "123456789012", "aws:SourceArn": ALARM, "aws:SecureTransport": "true"}


def publish(statements, context=CLOUDWATCH):
    """The topic policy's answer to CloudWatch's sns:Publish."""
    return iam.resource_allows(statements, "cloudwatch.amazonaws.com", "sns:Publish", TOPIC, context)


def test_arn_bool_and_if_exists_conditions_with_keys_of_any_case():
    allow = {
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": TOPIC,
        "Condition": {
            "ArnLike": {"AWS:SourceArn": "arn:aws:cloudwatch:*:123456789012:alarm:*"},
            "StringEquals": {"aws:sourceaccount": "123456789012"},
        },
    }
    assert publish([allow])[0]
    assert not publish(
        [allow], CLOUDWATCH | {"aws:SourceArn": ALARM.replace("123456789012", "999999999999")}
    )[0]
    tls = {"Effect": "Deny", "Principal": "*", "Action": "sns:Publish", "Resource": TOPIC,
           "Condition": {"Bool": {"aws:SecureTransport": "false"}}}  # fmt: skip
    assert publish([allow, tls])[0]
    assert publish([allow, tls], CLOUDWATCH | {"aws:SecureTransport": "false"}) == (False, "explicit deny")
    optional = allow | {"Condition": {"StringEqualsIfExists": {"aws:SourceOrgID": "o-1"}}}
    assert publish([optional])[0]


def test_a_resource_policy_speaks_only_for_the_principals_it_names():
    """CDK's enforce_ssl alone (a Deny) allows nothing; an account's root or a role names no service."""
    tls = {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "sns:Publish", "Resource": TOPIC,
           "Condition": {"Bool": {"aws:SecureTransport": "false"}}}  # fmt: skip
    assert publish([tls]) == (False, "no allow")
    root = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "kms:*",
            "Resource": "*"}  # fmt: skip
    assert not iam.resource_allows([root], "cloudwatch.amazonaws.com", "kms:Decrypt", KEY, CLOUDWATCH)[0]
    service = root | {"Principal": {"Service": ["cloudwatch.amazonaws.com"]}}
    service["Action"] = ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert iam.resource_allows([service], "cloudwatch.amazonaws.com", "kms:GenerateDataKey", KEY, {})[0]
    assert not iam.resource_allows([service], "events.amazonaws.com", "kms:Decrypt", KEY, {})[0]


def test_a_call_on_a_resource_under_a_customer_key_asks_for_the_kms_actions_its_service_needs():
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hybridsync-WriterSecret-AbCdEf"
    queue = "arn:aws:sqs:us-east-1:123456789012:hybridsync-ScheduledFailures"
    keys = {secret: KEY, "hybridsync-WriterSecret": KEY, queue: KEY, "arn:aws:s3:::hybridsync-bodies": KEY}

    def kms(service, operation, **params):
        found = iam.requested(service, operation, params, "us-east-1", "123456789012", keys)
        return [(action, resource) for action, resource, _ in found if action.startswith("kms:")]

    assert kms("secretsmanager", "GetSecretValue", SecretId=secret) == [("kms:Decrypt", KEY)]
    assert kms("secretsmanager", "GetSecretValue", SecretId="hybridsync-WriterSecret") == [
        ("kms:Decrypt", KEY)
    ]
    url = "http://127.0.0.1:5000/123456789012/hybridsync-ScheduledFailures"
    assert kms("sqs", "SendMessage", QueueUrl=url, MessageBody="x") == [
        ("kms:GenerateDataKey", KEY), ("kms:Decrypt", KEY)]  # fmt: skip
    assert kms("s3", "PutObject", Bucket="hybridsync-bodies", Key="a") == [("kms:GenerateDataKey", KEY)]
    assert kms("s3", "GetObject", Bucket="hybridsync-bodies", Key="a") == [("kms:Decrypt", KEY)]
    assert kms("s3", "HeadObject", Bucket="hybridsync-bodies", Key="a") == []  # a HEAD decrypts nothing
    assert kms("s3", "PutObject", Bucket="other", Key="a") == []  # not under the key
    assert kms("dynamodb", "PutItem", TableName="main", Item={}) == []  # DynamoDB's grant, not the caller's
    assert asked("secretsmanager", "GetSecretValue", SecretId=secret) == [
        ("secretsmanager:GetSecretValue", secret, {})]  # fmt: skip  # no keys: no KMS


def _client(service, statements, keys):
    import botocore.session

    session = botocore.session.get_session()
    spec = {"role": "R", "function": "Users", "region": "us-east-1", "account": "123456789012",
            "statements": statements, "keys": keys}  # fmt: skip
    iam.install(session.get_component("event_emitter"), json.dumps(spec))
    return session.create_client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                                 aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip


def test_a_call_without_the_kms_action_is_refused_as_its_service_words_it():
    """Secrets Manager: AccessDeniedException "Access to KMS is not allowed"; SQS relays KMS's
    denial (KMS.AccessDeniedException). Refused before any request leaves (sockets are off here)."""
    import botocore.exceptions

    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:s-AbCdEf"
    read = {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": secret}
    secrets = _client("secretsmanager", [read], {secret: KEY})
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        secrets.get_secret_value(SecretId=secret)
    assert refused.value.response["Error"] == {
        "Code": "AccessDeniedException",
        "Message": "Access to KMS is not allowed",
    }
    queue = "arn:aws:sqs:us-east-1:123456789012:q"
    send = {"Effect": "Allow", "Action": ["sqs:SendMessage", "kms:Decrypt"], "Resource": [queue, KEY]}
    sqs = _client("sqs", [send], {queue: KEY})
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        sqs.send_message(QueueUrl="http://127.0.0.1:9/123456789012/q", MessageBody="x")
    error = refused.value.response["Error"]
    assert error["Code"] == "KMS.AccessDeniedException"
    assert f"is not authorized to perform: kms:GenerateDataKey on resource: {KEY}" in error["Message"]
