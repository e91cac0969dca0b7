"""CloudFormation custom resource: bring the PostgreSQL schema to the heads of both Alembic branches
(the engine's and the project's, shipped beside the model) on deploy."""

from typing import Any

from aws_lambda_powertools import Logger

from hybridsync import migrations, settings

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    url = settings.database_url()
    # Deleting the stack never drops data: only Create and Update migrate.
    if event["RequestType"] in ("Create", "Update"):
        migrations.upgrade(url)  # the model and its revisions: HYBRIDSYNC_MODEL, HYBRIDSYNC_MIGRATIONS
    revision = migrations.current_revision(url)
    logger.info("schema at revision", extra={"revision": revision, "request": event["RequestType"]})
    return {"PhysicalResourceId": "hybridsync-schema", "Data": {"Revision": revision or ""}}
