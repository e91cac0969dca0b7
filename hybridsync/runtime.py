"""Clients a Lambda container builds once and reuses across invocations (configured from the
environment the stacks set; see hybridsync.settings)."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa

from hybridsync import aws, db, settings


@functools.cache
def engine() -> sa.Engine:
    # pre-ping and a small pool: the pool outlives invocations, the proxy multiplexes containers
    return db.create_engine(settings.database_url())


@functools.cache
def dynamodb() -> Any:
    return aws.client("dynamodb")
