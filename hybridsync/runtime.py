"""Clients a Lambda container builds once and reuses across invocations (configured from the
environment the stacks set; see hybridsync.settings). Each is built on first use, so a function
imports only the client libraries it really uses."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from hybridsync import settings

if TYPE_CHECKING:
    import sqlalchemy as sa

    from hybridsync.declare import Model


@functools.cache
def engine() -> sa.Engine:
    from hybridsync import db

    # One connection: a container runs one invocation at a time, so a function's connections are
    # its concurrency (shards x parallelization for a stream consumer), which `hybridsync plan` sizes.
    return db.create_engine(settings.database_url(), pool_size=1, max_overflow=0)


@functools.cache
def dynamodb() -> Any:
    from hybridsync import aws

    return aws.client("dynamodb")


@functools.cache
def s3() -> Any:
    from hybridsync import aws

    return aws.client("s3")


@functools.cache
def model() -> Model:
    """The user's model (`HYBRIDSYNC_MODEL`, set by the stacks; see hybridsync.config)."""
    from hybridsync import config

    return config.model()


@functools.cache
def tables() -> dict[str, str]:
    """Logical -> physical name of every table the model declares (`TABLE_<NAME>`)."""
    return settings.table_names([t.name for t in model().tables])
