"""CloudFormation custom resource, run on every deploy before the migration: the database's logins
(hybridsync.sql.roles), each with the password of its own secret (`DB_ROLE_SECRETS`, role -> ARN), made
as the database's admin (`DB_SECRET_ARN`). The only function that reads the admin's secret; the
pipeline's functions log in as their roles. A role's secret that does not say where the database is
(an existing database's) gets its host, port and name from the admin's, as rotation needs them."""

import json
import os
from typing import Any

from aws_lambda_powertools import Logger

from hybridsync.runtime import aws, clients, db, handling, settings
from hybridsync.sql import roles

logger = Logger()
tracer = clients.tracer()
WHERE = ("host", "port", "dbname", "engine")


@handling.lambda_handler(logger, tracer)  # the doctor's probe first, then trace, log
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    resource = {"PhysicalResourceId": "hybridsync-users"}
    if event["RequestType"] == "Delete":  # the stack goes: logins stay with the data they own
        return resource
    arns: dict[str, str] = json.loads(settings.required("DB_ROLE_SECRETS"))
    secrets = aws.client("secretsmanager")

    def read(arn: str) -> dict[str, Any]:
        return json.loads(secrets.get_secret_value(SecretId=arn)["SecretString"])

    values = {role: read(arn) for role, arn in arns.items()}
    engine = db.create_engine(settings.database_url(), pool_size=1, max_overflow=0)
    try:
        with engine.begin() as conn:
            handed = roles.create_users(conn, {role: value["password"] for role, value in values.items()})
    finally:
        engine.dispose()
    # An existing database's admin secret says where it is; through the proxy as the admin (Aurora:
    # an IAM login) there is none, and the roles' secrets hold the cluster's address already.
    admin_arn = os.environ.get("DB_SECRET_ARN")
    admin = read(admin_arn) if admin_arn else {}
    for role, value in values.items():
        missing = {k: admin[k] for k in WHERE if k in admin and k not in value}
        if missing:
            secrets.put_secret_value(SecretId=arns[role], SecretString=json.dumps(value | missing))
    logger.info("database logins ready", extra={"roles": sorted(values), "handed_to_migrator": handed})
    return resource | {"Data": {"Roles": ",".join(roles.user(r) for r in sorted(values))}}
