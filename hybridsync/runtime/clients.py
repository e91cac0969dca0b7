"""Clients a Lambda container builds once and reuses across invocations (configured from the
environment the stacks set; see hybridsync.runtime.settings). Each is built on first use, so a function
imports only the client libraries it really uses."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from hybridsync.runtime import settings

if TYPE_CHECKING:
    import sqlalchemy as sa

    from hybridsync.model.declare import Model


@functools.cache
def engine() -> sa.Engine:
    url = os.environ.get("DATABASE_URL", "").strip()
    return connected(None if url else settings.database(), url)


def connected(where: settings.Database | None, url: str = "") -> sa.Engine:
    """An engine of one connection to `where` (or to `url`, DATABASE_URL's)."""
    from hybridsync.runtime import db

    # One connection: a container runs one invocation at a time, so a function's connections are
    # its concurrency (shards x parallelization for a stream consumer), which `hybridsync plan` sizes.
    # without DATABASE_URL, each connection gets its password when it is made (_fresh_credentials)
    created = db.create_engine(url or where.url(""), pool_size=1, max_overflow=0)  # type: ignore[union-attr]
    if where is not None:
        _fresh_credentials(created, where)
    if settings.tracing():
        _trace_statements(created)
    return created


def _fresh_credentials(engine: sa.Engine, database: settings.Database) -> None:
    """Each new connection with a password of now: a new IAM token, or the secret's password; when
    that fails authentication (the secret was rotated since it was cached), the secret is read
    again and the connection tried once more. A warm container survives a rotation."""
    from sqlalchemy import event

    @event.listens_for(engine, "do_connect")
    def connect(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        cparams["password"] = database.password()
        try:
            return dialect.connect(*cargs, **cparams)
        except Exception as error:
            if database.iam or not settings.authentication_failed(error):
                raise
        cparams["password"] = database.password(fresh=True)
        return dialect.connect(*cargs, **cparams)


def _trace_statements(engine: sa.Engine) -> None:
    """Each SQL statement a subsegment of the function's trace (X-Ray's SDK patches boto3, not
    psycopg 3): the trace goes on past the function's edge into PostgreSQL."""
    from aws_xray_sdk.core import xray_recorder
    from sqlalchemy import event

    @event.listens_for(engine, "before_cursor_execute")
    def begin(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        subsegment = xray_recorder.begin_subsegment("postgresql", namespace="remote")
        if subsegment is not None:
            subsegment.put_metadata("statement", statement[:500], "sql")

    @event.listens_for(engine, "after_cursor_execute")
    def end(*_: Any) -> None:
        xray_recorder.end_subsegment()

    @event.listens_for(engine, "handle_error")
    def failed(*_: Any) -> None:
        xray_recorder.end_subsegment()


def tracer() -> Any:
    """Powertools Tracer (X-Ray active tracing unless `-c tracing=false`): a segment per invocation,
    every AWS SDK call a subsegment."""
    from aws_lambda_powertools import Tracer

    return Tracer()


@functools.cache
def dynamodb() -> Any:
    from hybridsync.runtime import aws

    return aws.client("dynamodb")


@functools.cache
def s3() -> Any:
    from hybridsync.runtime import aws

    return aws.client("s3")


@functools.cache
def model() -> Model:
    """The user's model (`HYBRIDSYNC_MODEL`, set by the stacks; see hybridsync.model.config)."""
    from hybridsync.model import config

    return config.model()


@functools.cache
def tables() -> dict[str, str]:
    """Logical -> physical name of every table the model declares (`TABLE_<NAME>`)."""
    return settings.table_names([t.name for t in model().tables])
