"""Helpers for the pipeline tests: versioned writers and stream readers on the session stack."""

from __future__ import annotations

import itertools
import os
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hybridsync import local
from hybridsync.dynamodb import store
from hybridsync.local.dynamodb import streams
from hybridsync.local.process import UpProcess, tuned_assembly
from hybridsync.model import versions
from hybridsync.runtime import clients
from shop.model import MODEL


class Workload:
    """Writes entity items the way an application would: every write with a fresh, growing version."""

    def __init__(self, stack: local.LocalStack):
        self.client = stack.client()
        self.table = stack.table_names["main"]
        self.last: dict[tuple[str, str], int] = {}
        self.prefix = f"t{uuid.uuid4().hex[:8]}"
        self._ids = itertools.count(1)

    def id(self, kind: str) -> str:
        return f"{self.prefix}-{kind}{next(self._ids)}"

    def _version(self, entity: str, values: dict[str, Any]) -> int:
        slot = (entity, str(MODEL.entity(entity).key(values)))
        self.last[slot] = versions.next_version(self.last.get(slot))
        return self.last[slot]

    def put(self, entity: str, **values: Any) -> dict[str, Any]:
        values["Version"] = self._version(entity, values)
        assert store.put(self.client, self.table, MODEL.entity(entity), values)
        return values

    def delete(self, entity: str, **values: Any) -> None:
        # A delete has no image of its own: its REMOVE record carries the last version written.
        slot = (entity, str(MODEL.entity(entity).key(values)))
        assert store.delete(self.client, self.table, MODEL.entity(entity), values, self.last[slot])

    def order(self, order_id: str, customer: str = "c1", **changes: Any) -> dict[str, Any]:
        values = {"OrderId": order_id, "CustomerId": f"{self.prefix}-{customer}", "Status": "OPEN",
                  "CreatedAt": "2026-11-22T07:00:00.000Z", "Total": Decimal("10.00")}  # fmt: skip
        return self.put("Order", **(values | changes))

    def line(self, order_id: str, line_no: int, customer: str = "c1", **changes: Any) -> dict[str, Any]:
        values = {"OrderId": order_id, "CustomerId": f"{self.prefix}-{customer}",
                  "CreatedAt": "2026-11-22T07:00:00.000Z", "Status": "OPEN", "LineNo": line_no,
                  "ProductId": "p-1", "Quantity": 1, "UnitPrice": Decimal("10.00")}  # fmt: skip
        return self.put("OrderLine", **(values | changes))


@pytest.fixture
def workload(stack):
    return Workload(stack)


@pytest.fixture(scope="session")
def truth(stack):
    """The session's tables, read by the write-back to settle what the stream cannot order."""
    from hybridsync.sync import writeback

    return writeback.Truth(stack.client(), stack.table_names)


@pytest.fixture
def stream(stack, dynamodb):
    """A reader positioned at the end of the main table's stream: `stream.read()` returns what
    was written since, as Lambda event records."""
    arn = dynamodb.describe_table(TableName=stack.table_names["main"])["Table"]["LatestStreamArn"]
    reader = streams.StreamReader(stack.client("dynamodbstreams"), arn, start="LATEST")
    reader.read()
    return reader


def _forget_clients():
    if clients.engine.cache_info().currsize:
        clients.engine().dispose()
    clients.engine.cache_clear()
    clients.dynamodb.cache_clear()
    clients.s3.cache_clear()


def use_database_secret(stack, monkeypatch, secret: str) -> str:
    """The AWS way in for a function: `DB_SECRET_ARN` naming a secret on moto's Secrets Manager,
    no `DATABASE_URL`. Returns the secret's ARN."""
    secrets = stack.client("secretsmanager")
    arn = secrets.create_secret(Name=f"db-{uuid.uuid4().hex[:8]}", SecretString=secret)["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    environment = {"DB_SECRET_ARN": arn, "AWS_ENDPOINT_URL_SECRETS_MANAGER": stack.services_endpoint,
                   "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local",
                   "AWS_SECRET_ACCESS_KEY": "local"}  # fmt: skip
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return arn


@pytest.fixture
def handler_env(stack, monkeypatch):
    """The environment the stacks give a function, and a cold start: the per-container clients
    are built anew from it."""
    for name, value in stack.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "hybridsync")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "test")
    _forget_clients()
    yield stack
    _forget_clients()


def started_up(
    cloud_assembly: Path, work: Path, prefix: str, *options: str, **mapping_properties: Any
) -> UpProcess:
    """`hybridsync up` in a process of its own, with services of its own (DynamoDB Local, PostgreSQL),
    started from a shell that holds none of the app's variables, as a new user's does; the
    assembly's mappings edited by `mapping_properties` (`MaximumBatchingWindowInSeconds=0`)."""
    assembly = cloud_assembly
    if mapping_properties:
        assembly = tuned_assembly(cloud_assembly, work / "assembly", **mapping_properties)
    (work / "state").mkdir()
    ours = ("DYNAMODB_", "AWS_", "DATABASE_URL", "LAMBDA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    app = UpProcess(assembly, work / "state", env, prefix=prefix, options=options)
    app.start()
    return app


@pytest.fixture
def empty_database(engine):
    """A fresh database on the session's server, dropped afterwards."""
    name = f"migrate_{uuid.uuid4().hex[:8]}"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = engine.url.set(database=name).render_as_string(hide_password=False)
    yield url
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture
def refusing(engine):
    """The orders table refuses one status, as a constraint of the team's own would (a test may
    drop it itself: the fix)."""
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE orders ADD CONSTRAINT no_refused CHECK (status <> 'REFUSED')"))
    yield "REFUSED"
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE orders DROP CONSTRAINT IF EXISTS no_refused"))
