"""Alembic migrations in two branches sharing one `alembic_version` table: the engine's own
(`hybridsync`: the outbox, the dead letters, the trigger functions; shipped here) and the
project's (its entities' tables and their outbox triggers, in `<package>/migrations/versions`, or
where `[tool.hybridsync] migrations` says). `generate` writes the project's next revision from its
model, triggers included; `check` says how a database differs from the model.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic import util as alembic_util
from alembic.config import Config
from alembic.operations import ops
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from hybridsync.model import config
from hybridsync.model.declare import Model, Side
from hybridsync.model.errors import ConfigurationError
from hybridsync.runtime import db

MIGRATIONS = Path(__file__).parent
ENGINE_VERSIONS = MIGRATIONS / "versions"
ENGINE_BRANCH = "hybridsync"
ENGINE_BASE = "hybridsync_0001"  # a project's first revision depends on it
TRIGGERS = ("version", "outbox")  # <table>_version and <table>_outbox on every PostgreSQL-mastered table


def project_versions(spec: str | None = None) -> Path | None:
    """Where the project's revisions live: `HYBRIDSYNC_MIGRATIONS` (in AWS: shipped beside the
    package), `[tool.hybridsync] migrations` (relative to the project, for the project's own model),
    else `migrations/versions` in the package of the model's module (`shop.model` -> `shop/`)."""
    if shipped := os.environ.get("HYBRIDSYNC_MIGRATIONS"):
        return Path(shipped).resolve()
    configured = config.settings().get("migrations")
    if configured and (spec is None or spec == config.settings().get("model")):
        return ((config.project_root() or Path.cwd()) / configured).resolve()
    module = config.model_spec(spec).split(":")[0]
    package = module.rpartition(".")[0]
    if not package:  # a top-level model module: the project's folder holds the revisions
        return (config.project_root() or Path.cwd()).resolve() / "migrations" / "versions"
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations))) / "migrations" / "versions"


def branch_label(spec: str | None = None) -> str:
    """The project's branch: named after the package of the model's module (`shop`, `tests_minimal`)."""
    module = config.model_spec(spec).split(":")[0]
    return (module.rpartition(".")[0] or "project").replace(".", "_")


def alembic_config(url: str, spec: str | None = None) -> Config:
    """The engine's environment over both branches' revisions, for the database at `url`."""
    versions = project_versions(spec)
    alembic = Config()
    alembic.set_main_option("script_location", str(MIGRATIONS))
    alembic.set_main_option("path_separator", "os")
    locations = [ENGINE_VERSIONS] + ([versions] if versions and versions.is_dir() else [])
    alembic.set_main_option("version_locations", os.pathsep.join(str(p) for p in locations))
    # ConfigParser interpolates '%': escape it so URL-encoded passwords survive.
    alembic.set_main_option("sqlalchemy.url", db.sqlalchemy_url(url).replace("%", "%%"))
    alembic.attributes["model"] = config.model(spec)
    return alembic


class MigrationFailed(ConfigurationError):
    """A revision PostgreSQL refused: which one, on which table and column, and why, in one line."""


def upgrade(
    url: str, revision: str = "heads", spec: str | None = None, *, lock_timeout_s: int | None = None
) -> None:
    """Both branches to their heads (or to `revision`), for the model `spec` names (the project's).
    Alembic's "head" means the one head; with the engine's branch beside the project's there are
    always two, so "head" is taken as both, as anyone used to Alembic means it. A revision that
    fails raises MigrationFailed naming it (the database stays at the revision before it).
    `lock_timeout_s`: a revision waits this long for a lock, then fails (PostgreSQL's lock_timeout)."""
    running = _Running()
    log = logging.getLogger("alembic.runtime.migration")
    log.addHandler(running)
    level = log.level
    log.setLevel(min(level or logging.INFO, logging.INFO))
    alembic = alembic_config(url, spec)
    alembic.attributes["lock_timeout_s"] = lock_timeout_s
    try:
        command.upgrade(alembic, "heads" if revision == "head" else revision)
    except sa.exc.DBAPIError as error:
        raise MigrationFailed(_failure(running.revision, error)) from None
    finally:
        log.removeHandler(running)
        log.setLevel(level)


class _Running(logging.Handler):
    """Which revision Alembic is running (it logs "Running upgrade A -> B, message")."""

    revision: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Running upgrade"):
            self.revision = message.removeprefix("Running upgrade ").strip()


def _failure(revision: str | None, error: sa.exc.DBAPIError) -> str:
    diagnosis = getattr(error.orig, "diag", None)
    table, column = getattr(diagnosis, "table_name", None), getattr(diagnosis, "column_name", None)
    where = ", ".join(f"{kind} {name}" for kind, name in (("table", table), ("column", column)) if name)
    said = (getattr(diagnosis, "message_primary", None) or str(error.orig)).strip().splitlines()[0]
    hint = ""
    if getattr(error.orig, "sqlstate", None) == "23502":  # not_null_violation
        hint = " (a field added to a table with rows needs Field(..., default=...), or required=False)"
    return f"revision {revision or '?'} failed{' on ' + where if where else ''}: {said}{hint}"


def downgrade(url: str, revision: str, spec: str | None = None) -> None:
    command.downgrade(alembic_config(url, spec), revision)


def unknown_revisions(url: str, spec: str | None = None) -> list[str]:
    """The database's revisions these revision files do not know: a database ahead of this code (a
    rollback deploying older code after a newer one migrated)."""
    script = ScriptDirectory.from_config(alembic_config(url, spec))
    unknown = []
    for revision in filter(None, (current_revision(url) or "").split(", ")):
        try:
            script.get_revision(revision)
        except alembic_util.CommandError:
            unknown.append(revision)
    return unknown


def current_revision(url: str) -> str | None:
    """The database's revisions, one per branch, comma-joined; None for an empty database."""
    engine = db.create_engine(url)
    try:
        with engine.connect() as conn:
            heads = MigrationContext.configure(conn).get_current_heads()
    finally:
        engine.dispose()
    return ", ".join(sorted(heads)) or None


# --- a model's outbox triggers ---------------------------------------------------------------


def triggered_tables(model: Model, *, managed_only: bool = True) -> dict[str, tuple[str, ...]]:
    """Table -> key columns of every table mastered in PostgreSQL: each gets the two triggers.
    The revisions create them on the managed tables; on a table the user manages (`managed=False`)
    the user creates them (`create_triggers` gives the SQL) and `check` verifies them."""
    return {
        e.sql_table: e.sql_key_columns
        for e in model.mastered_in(Side.POSTGRESQL)
        if e.sql_table and (e.managed or not managed_only)
    }


def create_triggers(table: str, key_columns: tuple[str, ...]) -> list[str]:
    keys = ", ".join(f"'{column}'" for column in key_columns)
    return [
        f"CREATE TRIGGER {table}_version BEFORE UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION hybridsync_next_version()",
        f"CREATE TRIGGER {table}_outbox AFTER INSERT OR UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION hybridsync_outbox({keys})",
    ]


def drop_triggers(table: str) -> list[str]:
    return [f"DROP TRIGGER IF EXISTS {table}_{kind} ON {table}" for kind in reversed(TRIGGERS)]


def existing_triggers(conn: sa.Connection) -> dict[str, set[str]]:
    """Table -> the engine's triggers on it (`version`, `outbox`) in the database."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_proc p ON p.oid = t.tgfoid WHERE NOT t.tgisinternal "
            "AND p.proname IN ('hybridsync_next_version', 'hybridsync_outbox')"
        )
    )
    found: dict[str, set[str]] = {}
    for table, name in rows:
        found.setdefault(table, set()).add(name.removeprefix(f"{table}_"))
    return found


def trigger_drift(conn: sa.Connection, model: Model) -> list[str]:
    """The model's triggers the database lacks (on a user-managed table: once the table exists),
    and the engine's triggers on tables no longer mastered in PostgreSQL, in words."""
    everything, have = triggered_tables(model, managed_only=False), existing_triggers(conn)
    managed = triggered_tables(model)
    present = set(sa.inspect(conn).get_table_names())
    wanted = [t for t in sorted(everything) if t in managed or t in present]
    said = [
        f"table {table} lacks its {' and '.join(sorted(set(TRIGGERS) - have.get(table, set())))} trigger"
        + ("" if table in managed else " (a table you manage: create them with create_triggers)")
        for table in wanted
        if set(TRIGGERS) - have.get(table, set())
    ]
    return said + [
        f"table {table} has outbox triggers but is not mastered in PostgreSQL"
        for table in sorted(set(have) - set(everything))
    ]


def trigger_ops(
    conn: sa.Connection, model: Model
) -> tuple[list[ops.MigrateOperation], list[ops.MigrateOperation]]:
    """What brings the database's triggers to the model's: (upgrade ops, downgrade ops)."""
    wanted, have = triggered_tables(model), existing_triggers(conn)
    up: list[ops.MigrateOperation] = []
    down: list[ops.MigrateOperation] = []
    for table, key in sorted(wanted.items()):
        if have.get(table) != set(TRIGGERS):
            stale = drop_triggers(table) if have.get(table) else []  # half a pair: made again whole
            up += [ops.ExecuteSQLOp(sql) for sql in stale + create_triggers(table, key)]
            down += [ops.ExecuteSQLOp(sql) for sql in drop_triggers(table)]
    for table in sorted(set(have) - set(wanted)):  # no longer mastered in PostgreSQL
        up += [ops.ExecuteSQLOp(sql) for sql in drop_triggers(table)]
    return up, down


# --- expand, then contract: a revision never adds what rows already there cannot satisfy ------


class Refused(ConfigurationError):
    """A model change `generate` will not write as a revision, and why."""


def expand_only(upgrade_ops: ops.UpgradeOps, model: Model) -> None:
    """Check the revision about to be written against tables that may hold rows: a column added
    NOT NULL without a default is refused (every existing row would violate it); a column made NOT
    NULL is first filled with its field's default where it is NULL, or refused without one. New
    tables take anything (they are empty)."""
    fields = {(e.sql_table, f.column): (e, f) for e in model.synced() if e.sql_table for f in e.fields}
    for table_ops in upgrade_ops.ops:
        if not isinstance(table_ops, ops.ModifyTableOps):
            continue
        changed = []
        for op in table_ops.ops:
            entity, declared = fields.get((table_ops.table_name, _column_name(op)), (None, None))
            added = isinstance(op, ops.AddColumnOp)
            if added and not op.column.nullable and op.column.server_default is None:
                raise Refused(_needs_default(table_ops.table_name, op.column.name, entity, declared))
            if isinstance(op, ops.AlterColumnOp) and op.modify_nullable is False:
                if declared is None or declared.default is None:
                    raise Refused(_needs_default(table_ops.table_name, op.column_name, entity, declared))
                from hybridsync.sql.schema import server_default

                table, column = table_ops.table_name, op.column_name
                value = (server_default(declared) or "").replace("'", "''")
                fill = f"UPDATE {table} SET {column} = '{value}' WHERE {column} IS NULL"
                changed.append(ops.ExecuteSQLOp(fill))
            changed.append(op)
        table_ops.ops[:] = changed


def _column_name(op: Any) -> str | None:
    return op.column.name if isinstance(op, ops.AddColumnOp) else getattr(op, "column_name", None)


def _needs_default(table: str, column: str, entity: Any, declared: Any) -> str:
    name = f"{entity.name}.{declared.attribute}" if entity and declared else f"{table}.{column}"
    return (
        f"{name} is required and has no default: its column {table}.{column} cannot be NOT NULL on a "
        "table that may hold rows. Give it a default (Field(..., default=...)) or make it optional "
        "(required=False), then generate again"
    )


# --- generate and check ----------------------------------------------------------------------


def generate(url: str, message: str, spec: str | None = None) -> Path | None:
    """Write the project's next revision: what takes a database at the current heads to the model
    (tables, columns, types, and the outbox triggers). None when there is nothing to do. The
    database at `url` is brought to the heads first (autogenerate compares against it)."""
    versions = project_versions(spec)
    if versions is None:
        raise config.ConfigurationError(
            "no folder for the project's revisions: set [tool.hybridsync] migrations"
        )
    versions.mkdir(parents=True, exist_ok=True)
    alembic = alembic_config(url, spec)
    command.upgrade(alembic, "heads")
    script = ScriptDirectory.from_config(alembic)
    label = branch_label(spec)
    ours = [r for r in script.walk_revisions() if ENGINE_BRANCH not in (r.branch_labels or ())]
    written = command.revision(
        alembic,
        message,
        autogenerate=True,
        rev_id=f"{len(ours) + 1:04d}",
        version_path=str(versions),
        head=f"{label}@head" if ours else "base",
        branch_label=None if ours else label,
        depends_on=None if ours else ENGINE_BASE,
    )
    scripts = written if isinstance(written, list) else [written]
    if not scripts or scripts[0] is None:
        return None
    path = Path(scripts[0].path)
    if ruff := shutil.which("ruff"):  # the project's formatter, when it has one
        subprocess.run([ruff, "format", "--quiet", str(path)], check=False)
    return path


@dataclass
class Differences:
    """How a database differs from the model: schema (as Alembic compares it), triggers, revisions."""

    schema: list[str] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    revisions: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.schema or self.triggers or self.revisions)

    def lines(self) -> list[str]:
        return self.revisions + self.schema + self.triggers


def check(url: str, spec: str | None = None) -> Differences:
    """Differences between the database at `url` and the model (and the revisions on disk)."""
    model = config.model(spec)
    alembic = alembic_config(url, spec)
    heads = set(ScriptDirectory.from_config(alembic).get_heads())
    found = Differences()
    engine = db.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "include_object": include_object}
            )
            current = set(context.get_current_heads())
            if not heads <= applied(ScriptDirectory.from_config(alembic), current):
                found.revisions.append(
                    f"the database is at {sorted(current) or 'no revision'}, the revisions' "
                    f"heads are {sorted(heads)}: run `hybridsync migrations upgrade`"
                )
            from alembic.autogenerate import compare_metadata

            from hybridsync.sql.schema import metadata

            found.schema = [
                _said(diff) for diff in compare_metadata(context, metadata(model, managed_only=True))
            ]
            found.triggers = trigger_drift(conn, model)
    finally:
        engine.dispose()
    return found


def applied(script: ScriptDirectory, current: set[str]) -> set[str]:
    """Every revision the database's recorded heads imply: theirs, and their ancestors and
    dependencies (Alembic records a branch's head only, not the engine's revision it depends on)."""
    seen: set[str] = set()
    waiting = list(current)
    while waiting:
        revision = script.get_revision(waiting.pop())
        if revision is None or revision.revision in seen:
            continue
        seen.add(revision.revision)
        for parent in (revision.down_revision, revision.dependencies):
            waiting += [parent] if isinstance(parent, str) else list(parent or ())
    return seen


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Tables the model does not declare (or declares as the project's own) are left alone: a
    revision never drops a table it was not told about."""
    return not (type_ == "table" and reflected and compare_to is None)


def _said(diff: Any) -> str:
    """One Alembic difference, in words: `add table: suppliers`, `modify type: orders total ...`."""
    if isinstance(diff, list):  # column modifications come grouped
        return "; ".join(_said(d) for d in diff)
    kind, *rest = diff
    named = [getattr(r, "name", None) or str(r) for r in rest if r is not None and not isinstance(r, dict)]
    return f"{kind.replace('_', ' ')}: {' '.join(named)}"
