"""The local app in a replicated app's home Region (its stacks pinned there): what AWS requires of
a call outside us-east-1, on the session's moto server."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from hybridsync import local
from hybridsync.local.storage import Storage
from hybridsync.runtime import aws


def test_the_apps_buckets_are_made_in_its_region(stack):
    """Outside us-east-1 CreateBucket names its Region (LocationConstraint); without it S3 refuses
    the call (IllegalLocationConstraintException), as moto does."""
    name = f"home-{uuid.uuid4().hex[:8]}"
    account = SimpleNamespace(
        region="eu-west-1",
        buckets={"FailedBatchesBucket": name},
        client=lambda service: aws.client(service, stack.services_endpoint, "eu-west-1"),
    )
    Storage(account).create_buckets(account)  # type: ignore[arg-type]
    s3 = account.client("s3")
    assert s3.get_bucket_location(Bucket=name)["LocationConstraint"] == "eu-west-1"
    # the buckets `local.start` makes, from a shell that sourced such an app's .local/env
    prefix = f"home-{uuid.uuid4().hex[:8]}"
    (bucket,) = local.create_buckets(s3, prefix).values()
    assert s3.get_bucket_location(Bucket=bucket)["LocationConstraint"] == "eu-west-1"
