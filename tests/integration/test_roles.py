"""The database's roles on the embedded PostgreSQL: each function's login may do what its work needs
and nothing more (hybridsync.sql.roles), made as the Users and Schema custom resources make them."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from hybridsync.runtime import db
from hybridsync.sql import migrations, roles
from shop.model import MODEL

pytestmark = pytest.mark.integration
WRITTEN_BACK = MODEL.entity("Order").sql_table  # mastered in DynamoDB
EDITED = MODEL.entity("Customer").sql_table  # mastered in PostgreSQL


def login(admin_url: str, role: str, password: str) -> sa.Engine:
    url = sa.make_url(db.sqlalchemy_url(admin_url)).set(username=roles.user(role), password=password)
    return db.create_engine(url.render_as_string(hide_password=False))


def refused(engine: sa.Engine, statement: str) -> str:
    with pytest.raises(sa.exc.ProgrammingError) as failure, engine.begin() as conn:
        conn.execute(sa.text(statement))
    return str(failure.value.orig)


@pytest.fixture
def database(empty_database):
    """An empty database whose admin made a table before the roles existed (an upgrade of a
    deployment from before roles), then the logins, the schema as the migrator, and the grants."""
    admin = db.create_engine(empty_database)
    with admin.begin() as conn:
        conn.execute(sa.text("CREATE TABLE legacy_notes (id int PRIMARY KEY)"))
        passwords = {role: uuid.uuid4().hex for role in roles.ROLES}
        handed = roles.create_users(conn, passwords)
    assert handed == ["legacy_notes"]
    engines = {role: login(empty_database, role, passwords[role]) for role in roles.ROLES}
    migrator_url = engines["migrator"].url.render_as_string(hide_password=False)
    migrations.upgrade(migrator_url)
    with engines["migrator"].begin() as conn:
        assert roles.grant(conn, MODEL) == []
    yield admin, engines
    for engine in (admin, *engines.values()):
        engine.dispose()


def test_the_migrator_owns_the_schema_and_each_role_has_its_privileges(database):
    admin, _ = database
    with admin.connect() as conn:
        owners = dict(
            conn.execute(
                sa.text("SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'")
            ).all()
        )
        reader = roles.privileges(conn, "reader")
        writer = roles.privileges(conn, "writer")
    assert set(owners.values()) == {roles.user("migrator")}
    assert (
        writer[WRITTEN_BACK]
        == writer["outbox"]
        == writer["dead_letters"]
        == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    )
    assert reader[WRITTEN_BACK] == {"SELECT"}  # cache-aside reads it, never writes it
    assert reader[EDITED] == {"SELECT", "INSERT", "UPDATE", "DELETE"}  # the API edits what PostgreSQL masters
    assert "outbox" not in reader and "dead_letters" not in reader and writer["alembic_version"] == {"SELECT"}


def test_the_api_role_cannot_write_a_synced_table_and_the_writer_cannot_change_the_schema(database):
    _, engines = database
    reader, writer = engines["reader"], engines["writer"]
    assert "permission denied" in refused(reader, f"INSERT INTO {WRITTEN_BACK} (order_id) VALUES ('o-1')")
    assert "permission denied" in refused(reader, "DELETE FROM dead_letters")
    assert "permission denied" in refused(writer, "CREATE TABLE intruder (id int)")
    assert "must be owner" in refused(writer, f"ALTER TABLE {WRITTEN_BACK} ADD COLUMN intruder int")
    assert "must be owner" in refused(writer, "DROP TABLE outbox")
    with reader.begin() as conn:  # the API's edit of a PostgreSQL-mastered row reaches the outbox
        conn.execute(
            sa.text(f"INSERT INTO {EDITED} (customer_id, name, email) VALUES ('c-1', 'A', 'a@example.com')")
        )
    with writer.begin() as conn:  # ... which the drain (the writer) reads and clears
        assert conn.execute(sa.text("DELETE FROM outbox WHERE table_name = :t"), {"t": EDITED}).rowcount == 1


def test_users_and_grants_run_again_idempotently_with_a_new_password(database, empty_database):
    admin, engines = database
    with admin.begin() as conn:
        assert roles.create_users(conn, {"reader": "a-new-password"}) == []
    with pytest.raises(sa.exc.OperationalError, match="authentication failed"), engines["reader"].connect():
        pass
    with login(empty_database, "reader", "a-new-password").connect() as conn:
        assert conn.execute(sa.text(f"SELECT count(*) FROM {EDITED}")).scalar() == 0
    with engines["migrator"].begin() as conn:
        assert roles.grant(conn, MODEL) == []


def test_the_local_server_takes_verified_tls_only(stack):
    """Every local client connects as the functions reach RDS Proxy: TLS, the certificate and the
    name verified; a plain connection and one trusting other roots are refused."""
    import certifi
    import psycopg

    url = sa.make_url(stack.database_url)
    assert url.query["sslmode"] == "verify-full" and url.host == "127.0.0.1"
    where = {
        "host": url.host,
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "dbname": url.database,
    }
    with psycopg.connect(**where, sslmode="verify-full", sslrootcert=url.query["sslrootcert"]) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.pgconn.ssl_in_use
    with pytest.raises(psycopg.OperationalError, match="connection without TLS refused"):
        psycopg.connect(**where, sslmode="disable")
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(**where, sslmode="verify-full", sslrootcert=certifi.where())
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            **(where | {"password": "not-it"}), sslmode="verify-full", sslrootcert=url.query["sslrootcert"]
        )


def test_the_users_step_makes_the_logins_and_tells_an_existing_databases_secrets_where_it_is(
    handler_env, stack, empty_database, monkeypatch
):
    """The Users resource's function, as each deploy runs it: logged in as the admin without an
    admin secret (Aurora: IAM through the proxy), it makes the logins with their secrets' passwords;
    given an existing database's admin secret, it also copies its address into the roles' secrets."""
    from hybridsync.local.awslambda.context import Context
    from tests.handlers import load

    secrets, tag = stack.client("secretsmanager"), uuid.uuid4().hex[:8]
    values = {role: {"username": roles.user(role), "password": uuid.uuid4().hex} for role in roles.ROLES}
    arns = {role: secrets.create_secret(Name=f"{tag}-{role}", SecretString=json.dumps(value))["ARN"]
            for role, value in values.items()}  # fmt: skip
    monkeypatch.setenv("DATABASE_URL", empty_database)
    monkeypatch.setenv("DB_ROLE_SECRETS", json.dumps(arns))
    monkeypatch.delenv("DB_SECRET_ARN", raising=False)
    users = load("users")
    answer = users.handler({"RequestType": "Create"}, Context(function_name="Users"))
    assert answer["Data"]["Roles"] == "hybridsync_migrator,hybridsync_reader,hybridsync_writer"
    with login(empty_database, "reader", values["reader"]["password"]).connect() as conn:
        assert conn.execute(sa.text("SELECT current_user")).scalar() == "hybridsync_reader"
    assert "host" not in json.loads(secrets.get_secret_value(SecretId=arns["reader"])["SecretString"])
    where = {"host": "legacy.example", "port": 5433, "dbname": "legacy", "engine": "postgres"}
    admin = {"username": "admin", "password": "unused"} | where
    monkeypatch.setenv(
        "DB_SECRET_ARN", secrets.create_secret(Name=f"{tag}-admin", SecretString=json.dumps(admin))["ARN"]
    )
    users.handler({"RequestType": "Update"}, Context(function_name="Users"))
    for role, value in values.items():
        assert json.loads(secrets.get_secret_value(SecretId=arns[role])["SecretString"]) == value | where
