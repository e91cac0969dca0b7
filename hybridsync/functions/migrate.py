"""CloudFormation custom resource: bring the PostgreSQL schema to the heads of both Alembic branches
(the engine's and the project's, shipped beside the model) on deploy, before any function that needs
the schema changes (they depend on this resource). A revision waits `MIGRATION_LOCK_TIMEOUT_S` for a
table's lock, then fails the deploy rather than queue the app's writes behind it. A database ahead of
this code (a rollback to older code, after a newer deploy migrated) is left as it is and reported:
never downgraded by surprise, never a failed rollback. Runs as the migrator, which owns the schema;
after each upgrade it grants the writer and the reader their privileges (hybridsync.sql.roles)."""

import os
from typing import Any

from aws_lambda_powertools import Logger

from hybridsync.runtime import clients, db, handling, settings
from hybridsync.sql import migrations, roles

logger = Logger()
tracer = clients.tracer()


def grant(url: str) -> list[str]:
    """The roles' privileges on the tables of now (when the logins exist: the Users resource made
    them; a database without them is a development one, used as its admin)."""
    engine = db.create_engine(url, pool_size=1, max_overflow=0)
    try:
        with engine.begin() as conn:
            if roles.exist(conn):
                return roles.grant(conn, clients.model())
            logger.info("no database roles: nothing granted")
            return []
    finally:
        engine.dispose()


@handling.lambda_handler(logger, tracer)  # the doctor's probe first, then trace, log
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    # Deleting the stack never drops data, nor needs the database: a rollback whose database is
    # already gone, or unreachable, must still succeed.
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "hybridsync-schema")}
    url = settings.database_url()
    data: dict[str, str] = {}
    if event["RequestType"] in ("Create", "Update"):
        ahead = migrations.unknown_revisions(url)
        if ahead:
            logger.warning("the database is ahead of this code: left as it is", extra={"revisions": ahead})
            data["AheadOfCode"] = ", ".join(ahead)
        else:
            lock_timeout = int(os.environ.get("MIGRATION_LOCK_TIMEOUT_S", "10"))
            migrations.upgrade(url, lock_timeout_s=lock_timeout)  # the model and its revisions
        ungranted = grant(url)
        if ungranted:  # tables the team owns: they grant the roles themselves (README, Security)
            logger.warning("tables the migrator does not own: not granted", extra={"tables": ungranted})
            data["Ungranted"] = ", ".join(ungranted)
    revision = migrations.current_revision(url)
    logger.info("schema at revision", extra={"revision": revision, "request": event["RequestType"]})
    return {"PhysicalResourceId": "hybridsync-schema", "Data": {"Revision": revision or "", **data}}
