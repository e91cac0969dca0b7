"""Alembic on a real (embedded) PostgreSQL: upgrade from empty, downgrade, upgrade again."""

import uuid

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from hybridsync import db, migrations
from hybridsync.schema import metadata


@pytest.fixture
def empty_database(engine):
    """A fresh database on the session's server, dropped afterwards."""
    name = f"migrate_{uuid.uuid4().hex[:8]}"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = engine.url.set(database=name).render_as_string(hide_password=False)
    yield url
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))


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
            return compare_metadata(context, metadata)
    finally:
        engine.dispose()


def test_upgrade_from_empty_builds_exactly_the_declared_schema(empty_database):
    assert tables(empty_database) == set()
    migrations.upgrade(empty_database)
    assert tables(empty_database) == set(metadata.tables)
    assert drift(empty_database) == []  # the migrations and the model's metadata agree
    assert migrations.current_revision(empty_database) == "0002"


def test_downgrade_to_base_and_upgrade_again(empty_database):
    migrations.upgrade(empty_database)
    migrations.downgrade(empty_database, "base")
    assert tables(empty_database) == set()
    assert migrations.current_revision(empty_database) is None
    migrations.upgrade(empty_database)
    assert tables(empty_database) == set(metadata.tables)
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
