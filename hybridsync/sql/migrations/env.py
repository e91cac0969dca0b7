"""Alembic environment of both branches: the target is the model's schema (the engine's tables and
the model's managed ones); autogenerate adds the outbox triggers the model's PostgreSQL-mastered
tables need, refuses what existing rows cannot satisfy (`expand_only`) and writes no empty
revision."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from hybridsync.model import config as hybridsync_config
from hybridsync.sql.migrations import expand_only, include_object, trigger_ops
from hybridsync.sql.schema import metadata

config = context.config
model = config.attributes.get("model") or hybridsync_config.model()


def add_triggers(migration: object, revision: object, directives: list) -> None:
    script = directives[0]
    expand_only(script.upgrade_ops, model)
    up, down = trigger_ops(migration.connection, model)  # type: ignore[attr-defined]
    script.upgrade_ops.ops.extend(up)
    script.downgrade_ops.ops[:0] = down
    if script.upgrade_ops.is_empty():
        directives[:] = []  # nothing to do: no revision


connectable = engine_from_config(
    config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.", poolclass=pool.NullPool
)
with connectable.connect() as connection:
    context.configure(
        connection=connection, target_metadata=metadata(model, managed_only=True), compare_type=True,
        include_object=include_object, process_revision_directives=add_triggers,
    )  # fmt: skip
    with context.begin_transaction():
        if lock_timeout_s := config.attributes.get("lock_timeout_s"):
            # wait this long for a table's lock, then fail, rather than queue the app's writes behind
            # it; LOCAL: for this transaction only (a session SET would pin an RDS Proxy connection)
            context.execute(f"SET LOCAL lock_timeout = '{int(lock_timeout_s)}s'")
        context.run_migrations()
connectable.dispose()
