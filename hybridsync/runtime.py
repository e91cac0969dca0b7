"""Clients a Lambda container builds once and reuses across invocations (configured from the
environment the stacks set; see hybridsync.settings). Each is built on first use, so a function
imports only the client libraries it really uses."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from hybridsync import settings

if TYPE_CHECKING:
    import sqlalchemy as sa


@functools.cache
def engine() -> sa.Engine:
    from hybridsync import db

    # pre-ping and a small pool: the pool outlives invocations, the proxy multiplexes containers
    return db.create_engine(settings.database_url())


@functools.cache
def dynamodb() -> Any:
    from hybridsync import aws

    return aws.client("dynamodb")


@functools.cache
def s3() -> Any:
    from hybridsync import aws

    return aws.client("s3")
