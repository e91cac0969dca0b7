"""boto3 clients, pointed at local endpoints when they are given: `DYNAMODB_ENDPOINT` for DynamoDB
and its streams (DynamoDB Local; `DYNAMODB_STREAMS_ENDPOINT` for the streams of an app running
with production's shards, `hybridsync up --shards`), `AWS_ENDPOINT` for the other services (moto
server: S3, SQS, Secrets Manager; it defaults to `DYNAMODB_ENDPOINT`, for one server that serves
them all), `LAMBDA_ENDPOINT` for the local app's Lambda API (invoke, stream mappings)."""

from __future__ import annotations

import os
from typing import Any

import boto3
from botocore.config import Config

LOCAL_REGION = "us-east-1"
DYNAMODB_SERVICES = ("dynamodb", "dynamodbstreams")


def endpoint_of(service: str) -> str | None:
    """The local endpoint the environment names for `service`, if any."""
    dynamodb = os.environ.get("DYNAMODB_ENDPOINT") or None
    if service == "dynamodbstreams":
        return os.environ.get("DYNAMODB_STREAMS_ENDPOINT") or dynamodb
    if service in DYNAMODB_SERVICES:
        return dynamodb
    if service == "lambda" and os.environ.get("LAMBDA_ENDPOINT"):  # the local app's (local/awslambda/)
        return os.environ["LAMBDA_ENDPOINT"]
    return os.environ.get("AWS_ENDPOINT") or dynamodb


def client(service: str, endpoint: str | None = None, region: str | None = None, **config: Any) -> Any:
    """A client for `service`. With an endpoint (DynamoDB Local, moto server), placeholder
    credentials are used so nothing depends on the caller's AWS profile."""
    endpoint = endpoint or endpoint_of(service)
    settings = Config(
        retries=config.pop("retries", {"mode": "standard", "max_attempts": 8}),
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
    elif region:  # a Region's own endpoint (a global table's replica, a standby's stacks)
        kwargs["region_name"] = region
    return boto3.client(service, **kwargs)
