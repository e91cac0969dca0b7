"""The local IAM check: what a call asks for, and how a role's statements answer it."""

from __future__ import annotations

from hybridsync.local import iam

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
