"""Alembic on a real (embedded) PostgreSQL: the engine's branch and the shop's, upgraded from empty,
downgraded, upgraded again; and what `hybridsync migrations check` sees (the generate side, for a
model that grows, is the new-project walk-through in tests/reliability/test_new_project.py)."""

from dataclasses import replace

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from hybridsync.model.declare import Entity, Field, FieldType, Side, Template
from hybridsync.runtime import db
from hybridsync.sql import migrations
from hybridsync.sql.schema import metadata
from shop.model import MODEL

SCHEMA = metadata(MODEL, managed_only=True)


def tables(url):
    engine = db.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def drift(url):
    engine = db.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(context, SCHEMA)
    finally:
        engine.dispose()


def test_upgrade_from_empty_builds_exactly_the_declared_schema(empty_database):
    assert tables(empty_database) == set()
    migrations.upgrade(empty_database)
    assert tables(empty_database) == set(SCHEMA.tables)
    assert drift(empty_database) == []  # the migrations and the model's metadata agree
    assert migrations.current_revision(empty_database) == "0002"  # the shop's; it implies the engine's
    assert not migrations.check(empty_database)


def test_downgrade_to_base_and_upgrade_again(empty_database):
    migrations.upgrade(empty_database)
    migrations.downgrade(empty_database, "base")
    assert tables(empty_database) == set()
    assert migrations.current_revision(empty_database) is None
    migrations.upgrade(empty_database)
    assert tables(empty_database) == set(SCHEMA.tables)
    assert drift(empty_database) == []


def test_written_back_tables_carry_version_and_tombstone(engine):
    columns = {c["name"] for c in sa.inspect(engine).get_columns("orders")}
    assert {"order_id", "version", "deleted", "shipping_address"} <= columns
    mastered = {c["name"] for c in sa.inspect(engine).get_columns("product_availability")}
    assert "version" in mastered and "deleted" not in mastered


def test_sql_mastered_rows_get_a_millisecond_version(engine):
    with engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO product_availability (product_id, price, stock) VALUES ('p-v', 1.50, 3)"
        ))  # fmt: skip
        version = conn.execute(
            sa.text("SELECT version FROM product_availability WHERE product_id = 'p-v'")
        ).scalar_one()
        conn.execute(sa.text("DELETE FROM product_availability WHERE product_id = 'p-v'"))
    assert version > 1_700_000_000_000  # epoch milliseconds, the unit of every version


def test_database_url_forms(stack):
    assert db.sqlalchemy_url("postgresql://u:p@h/d").startswith("postgresql+psycopg://")
    assert db.sqlalchemy_url("postgres://u@h/d") == "postgresql+psycopg://u@h/d"
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        db.sqlalchemy_url("mysql://u:secret@h/d")


def test_check_sees_a_missing_trigger_a_missing_table_and_a_database_behind(empty_database):
    assert migrations.check(empty_database).revisions  # nothing applied yet
    migrations.upgrade(empty_database)
    engine = db.create_engine(empty_database)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER customers_outbox ON customers"))
            conn.execute(sa.text("DROP TABLE follows"))
    finally:
        engine.dispose()
    found = migrations.check(empty_database)
    assert found.triggers == ["table customers lacks its outbox trigger"]
    assert any("follows" in line for line in found.schema), found.schema
    assert not found.revisions


def test_a_table_the_user_manages_is_left_alone_and_its_triggers_are_checked(empty_database):
    """`managed=False`: the revisions neither create nor compare the table, but the outbox needs
    its triggers, so `check` asks for them once the table exists, and they carry its changes."""
    legacy = Entity(
        "LegacyAccount",
        MODEL.table("main"),
        Side.POSTGRESQL,
        fields=(Field("AccountId", FieldType.STRING), Field("Name", FieldType.STRING)),
        keys={"PK": Template("LEGACY#{AccountId}"), "SK": Template("PROFILE")},
        sql_table="legacy_accounts",
        sql_key=("AccountId",),
        managed=False,
    )
    model = replace(MODEL, entities=(*MODEL.entities, legacy))
    assert "legacy_accounts" not in metadata(model, managed_only=True).tables
    assert "legacy_accounts" not in migrations.triggered_tables(model)  # no revision creates them
    migrations.upgrade(empty_database)
    engine = db.create_engine(empty_database)
    try:
        with engine.begin() as conn:
            assert migrations.trigger_drift(conn, model) == []  # not there yet: nothing to ask of it
            conn.execute(sa.text("CREATE TABLE legacy_accounts (account_id text PRIMARY KEY, name text, "
                                 "version bigint NOT NULL DEFAULT 0)"))  # fmt: skip
            (said,) = migrations.trigger_drift(conn, model)
            assert (
                "legacy_accounts lacks its outbox and version trigger" in said and "create_triggers" in said
            )
            for sql in migrations.create_triggers("legacy_accounts", legacy.sql_key_columns):
                conn.execute(sa.text(sql))
            assert migrations.trigger_drift(conn, model) == []
            conn.execute(sa.text("INSERT INTO legacy_accounts (account_id, name) VALUES ('a-1', 'Ada')"))
            queued = conn.execute(sa.text("SELECT table_name, row_key FROM outbox")).all()
        assert [(t, dict(k)) for t, k in queued] == [("legacy_accounts", {"account_id": "a-1"})]
    finally:
        engine.dispose()


def test_the_deploy_time_migration_leaves_a_database_ahead_of_its_code_as_it_is(empty_database, monkeypatch):
    """A rollback deploys older code after a newer deploy migrated: the custom resource reports the
    database ahead of it and succeeds, never downgrading it (a failed rollback would leave the stack
    stuck)."""
    from hybridsync.functions import migrate
    from hybridsync.local.awslambda.context import Context

    migrations.upgrade(empty_database)
    engine = db.create_engine(empty_database)
    with engine.begin() as conn:  # what a newer release's revision would leave
        conn.execute(
            sa.text(
                "UPDATE alembic_version SET version_num = '0099_from_the_future' WHERE version_num = '0002'"
            )
        )
    monkeypatch.setenv("DATABASE_URL", empty_database)
    answer = migrate.handler({"RequestType": "Update"}, Context())
    assert answer["Data"]["AheadOfCode"] == "0099_from_the_future"
    with engine.connect() as conn:
        assert (
            "0099_from_the_future"
            in conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
        )
    engine.dispose()
    assert tables(empty_database) == set(SCHEMA.tables)  # nothing dropped


def test_a_migration_waits_for_a_lock_no_longer_than_its_timeout(empty_database):
    """The app holds a lock the migration needs: the migration fails after its lock_timeout rather than
    queue every write of the app behind it."""
    import time

    migrations.upgrade(empty_database, "hybridsync@hybridsync_0001")
    engine = db.create_engine(empty_database)
    with engine.connect() as holder:
        holder.execute(sa.text("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE"))
        started = time.monotonic()
        with pytest.raises(migrations.MigrationFailed, match="lock timeout"):
            migrations.upgrade(empty_database, lock_timeout_s=1)
        assert time.monotonic() - started < 15
        holder.rollback()
    engine.dispose()
    migrations.upgrade(empty_database, lock_timeout_s=1)  # once the lock is gone it goes through
    assert migrations.current_revision(empty_database) == "0002"


SHIPPING = """
from hybridsync.model.declare import *

DATA = Table("data", partition=KeyAttribute("pk"), sort=KeyAttribute("sk"), stream=NEW_AND_OLD_IMAGES)
SHIPMENT = Entity(
    "Shipment",
    DATA,
    Side.DYNAMODB,
    fields=(
        Field("ShipmentId", FieldType.STRING),
        Field("UpdatedAt", FieldType.TIMESTAMP{updated}),
        Field("Deleted", FieldType.BOOLEAN, required=False{deleted}),
    ),
    keys={{"pk": Template("SHIPMENT#{{ShipmentId}}"), "sk": Template("DETAILS")}},
    sql_table="shipments",
    sql_key=("ShipmentId",),
)
MODEL = Model(tables=(DATA,), entities=(SHIPMENT,))
"""


def test_a_field_named_like_an_engines_column_is_refused_until_it_names_its_own(empty_database, tmp_path,
                                                                                monkeypatch):  # fmt: skip
    """Issue 51, item 7: `UpdatedAt` and `Deleted`, as an existing service writes them, ended
    `migrations generate` in a DuplicateColumnError. Now the model is refused in one line naming
    `column=`; with it, the revision is generated and PostgreSQL takes both columns of each name."""
    from hybridsync.model.errors import ConfigurationError

    monkeypatch.syspath_prepend(str(tmp_path))
    named = (', column="shipment_updated_at"', ', column="is_deleted"')
    for package, updated, deleted in (("shipping_bare", "", ""), ("shipping", *named)):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "model.py").write_text(SHIPPING.format(updated=updated, deleted=deleted))
    with pytest.raises(ConfigurationError) as refused:
        migrations.generate(empty_database, "first", "shipping_bare.model:MODEL")
    said = str(refused.value)
    assert "Shipment.UpdatedAt: its column 'updated_at' is one the engine keeps" in said and "column=" in said
    assert "\n" not in said
    written = migrations.generate(empty_database, "first", "shipping.model:MODEL")
    assert written is not None and written.parent == tmp_path / "shipping" / "migrations" / "versions"
    migrations.upgrade(empty_database, spec="shipping.model:MODEL")
    engine = db.create_engine(empty_database)
    try:
        columns = {c["name"] for c in sa.inspect(engine).get_columns("shipments")}
    finally:
        engine.dispose()
    assert {"shipment_updated_at", "updated_at", "is_deleted", "deleted", "stream_position"} <= columns
