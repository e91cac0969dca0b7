"""Alembic migrations of the PostgreSQL schema (hybridsync.schema is what they build)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from hybridsync import db

MIGRATIONS = Path(__file__).parent


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolates '%': escape it so URL-encoded passwords survive.
    config.set_main_option("sqlalchemy.url", db.sqlalchemy_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    engine = db.create_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
