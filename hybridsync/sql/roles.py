"""PostgreSQL roles: every function logs in as the least it needs, none as the database's admin.

- `hybridsync_migrator` owns the schema and alone changes it (the migration function);
- `hybridsync_writer` reads and writes the synced tables, the outbox and the dead letters (write-back,
  the SQL -> DynamoDB drain, the aggregation's dead letters, the operations function);
- `hybridsync_reader` reads the synced tables (cache-aside: the API), and changes only the tables
  of entities mastered in PostgreSQL, which the API edits; it cannot touch a table DynamoDB masters,
  nor the outbox (the outbox trigger runs as its owner), nor change the schema.

`create_users` runs as the admin at each deploy (the Users custom resource, before the migration):
the logins and their passwords (each from its own secret), and the schema handed to the migrator.
`grant` runs as the migrator after each upgrade: what each role may do on the tables of now."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from hybridsync.model.declare import Model, Side

ROLES = ("migrator", "writer", "reader")
ENGINE_TABLES = ("outbox", "dead_letters")


def user(role: str) -> str:
    """The login of a role: `hybridsync_writer`, ..."""
    if role not in ROLES:
        raise ValueError(f"no database role {role!r}: one of {', '.join(ROLES)}")
    return f"hybridsync_{role}"


def exist(conn: sa.Connection) -> bool:
    """Whether this database has the logins (a development database used as its admin has none)."""
    found = conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": user("writer")})
    return found.first() is not None


def literal(conn: sa.Connection, value: str) -> str:
    from psycopg import sql

    return sql.Literal(value).as_string(conn.connection.driver_connection)  # type: ignore[arg-type]


def create_users(conn: sa.Connection, passwords: dict[str, str]) -> list[str]:
    """As the admin: each role a login with its password (created, or its password set again: the
    secret is the truth), and every object of the schema owned by the migrator. Returns the
    objects handed over."""
    database = conn.execute(sa.text("SELECT current_database()")).scalar_one()
    for role, password in passwords.items():
        name = user(role)
        exists = conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}).first()
        verb = "ALTER" if exists else "CREATE"
        conn.exec_driver_sql(f"{verb} ROLE {name} LOGIN PASSWORD {literal(conn, password)}")
    migrator = user("migrator")
    conn.exec_driver_sql(f'GRANT CONNECT, CREATE ON DATABASE "{database}" TO {migrator}')
    conn.exec_driver_sql(f"GRANT USAGE, CREATE ON SCHEMA public TO {migrator}")
    for role in ("writer", "reader"):
        conn.exec_driver_sql(f'GRANT CONNECT ON DATABASE "{database}" TO {user(role)}')
    # Aurora's admin is no superuser: to give an object away it must be a member of the new owner.
    conn.exec_driver_sql(f"GRANT {migrator} TO CURRENT_USER")
    owned_elsewhere = conn.execute(
        sa.text("""
            SELECT 'TABLE', format('%I', c.relname) FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')
               AND pg_get_userbyid(c.relowner) = current_user
            UNION ALL
            SELECT 'FUNCTION', format('%I()', p.proname) FROM pg_proc p
              JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'public' AND p.proname LIKE 'hybridsync\\_%'
               AND pg_get_userbyid(p.proowner) = current_user
        """)
    ).all()
    for kind, name in owned_elsewhere:  # made by the admin before the roles existed
        conn.exec_driver_sql(f"ALTER {kind} {name} OWNER TO {migrator}")
    return [name for _, name in owned_elsewhere]


def grant(conn: sa.Connection, model: Model) -> list[str]:
    """As the migrator, after an upgrade: each role's privileges on the model's tables and the
    engine's. Returns the tables it could not grant on (a table the team manages and owns itself:
    they grant those, as the README says)."""
    ours = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user"
    owned = set(conn.execute(sa.text(ours)).scalars())
    synced = {e.sql_table for e in model.synced() if e.sql_table}
    edited = {e.sql_table for e in model.mastered_in(Side.POSTGRESQL) if e.sql_table}
    writer, reader = user("writer"), user("reader")
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {writer}, {reader}")
    for table in sorted((synced | set(ENGINE_TABLES)) & owned):
        conn.exec_driver_sql(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO {writer}')
    for table in sorted(synced & owned):
        conn.exec_driver_sql(f'GRANT SELECT ON "{table}" TO {reader}')
    for table in sorted(edited & owned):
        conn.exec_driver_sql(f'GRANT INSERT, UPDATE, DELETE ON "{table}" TO {reader}')
    ours = (
        "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' AND sequenceowner = current_user"
    )
    sequences = conn.execute(sa.text(ours)).scalars()
    if "alembic_version" in owned:  # which revision the schema is at (`migrations current --deployed`)
        conn.exec_driver_sql(f"GRANT SELECT ON alembic_version TO {writer}")
    for sequence in sequences:  # the dead letters' and the outbox's ids
        conn.exec_driver_sql(f'GRANT USAGE, SELECT ON SEQUENCE "{sequence}" TO {writer}')
    # A change of a PostgreSQL-mastered table writes its outbox row as the trigger's owner: no role
    # that edits those tables (the API's, the team's own applications) needs the outbox.
    trigger = "SELECT 1 FROM pg_proc WHERE proname = 'hybridsync_outbox' AND pg_get_userbyid(proowner) = user"
    if conn.execute(sa.text(trigger)).first():
        conn.exec_driver_sql("ALTER FUNCTION hybridsync_outbox() SECURITY DEFINER SET search_path = public")
    return sorted((synced | set(ENGINE_TABLES)) - owned)


def privileges(conn: sa.Connection, role: str) -> dict[str, set[str]]:
    """Table -> the privileges `role` holds on it."""
    rows: Any = conn.execute(
        sa.text("""SELECT table_name, privilege_type FROM information_schema.role_table_grants
                    WHERE grantee = :g AND table_schema = 'public'"""),
        {"g": user(role)},
    )
    found: dict[str, set[str]] = {}
    for table, privilege in rows:
        found.setdefault(table, set()).add(privilege)
    return found
