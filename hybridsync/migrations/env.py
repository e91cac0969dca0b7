"""Alembic environment: migrates the database named by the config's sqlalchemy.url."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from hybridsync.schema import metadata

config = context.config

connectable = engine_from_config(
    config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.", poolclass=pool.NullPool
)
with connectable.connect() as connection:
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
connectable.dispose()
