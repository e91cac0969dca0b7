"""boto3 clients for DynamoDB and its streams, pointed at `DYNAMODB_ENDPOINT` when one is given."""

from __future__ import annotations

import os
from typing import Any

import boto3
from botocore.config import Config

LOCAL_REGION = "us-east-1"


def client(service: str, endpoint: str | None = None, region: str | None = None, **config: Any) -> Any:
    """A client for `dynamodb`, `dynamodbstreams` or `s3`. With an endpoint (moto server, DynamoDB Local),
    placeholder credentials are used so nothing depends on the caller's AWS profile."""
    endpoint = endpoint or os.environ.get("DYNAMODB_ENDPOINT") or None
    settings = Config(
        retries={"mode": "standard", "max_attempts": 8},
        # Streams calls otherwise go to an account-based endpoint that endpoint_url cannot serve.
        account_id_endpoint_mode="disabled",
        max_pool_connections=32,  # one client serves every poller and worker thread of the local app
        **config,
    )
    kwargs: dict[str, Any] = {"config": settings}
    if endpoint and service == "s3":  # one local endpoint serves every bucket: no bucket subdomains
        kwargs["config"] = settings.merge(Config(s3={"addressing_style": "path"}))
    if endpoint:
        kwargs |= {
            "endpoint_url": endpoint,
            "region_name": region or os.environ.get("AWS_REGION") or LOCAL_REGION,
            "aws_access_key_id": "local",
            "aws_secret_access_key": "local",
        }
    return boto3.client(service, **kwargs)
