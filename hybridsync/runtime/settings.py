"""Configuration from the environment the stacks set, validated with errors that name the variable."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from hybridsync.model.errors import ConfigurationError

# botocore's DEBUG lines carry whole request and response bodies: a secret's value, every item
# read. Whatever level a function's logging is turned to, they stay off (a test turns logging to
# DEBUG, reads the database secret and greps every line for the password).
for _name in ("botocore", "boto3", "urllib3"):
    logging.getLogger(_name).setLevel(max(logging.getLogger(_name).level, logging.INFO))


def required(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"environment variable {name} is not set")
    return value


def table_name(logical: str) -> str:
    """Physical name of a declared table: `TABLE_MAIN`, `TABLE_CHUNKS`, ..."""
    return required(f"TABLE_{logical.upper()}")


def table_names(logical: list[str]) -> dict[str, str]:
    """Logical -> physical name of each of these tables (their `TABLE_<NAME>` variables)."""
    return {name: table_name(name) for name in logical}


def bucket_name(logical: str) -> str:
    """Physical name of a bucket of the stacks: `BUCKET_BODIES`, ..."""
    return required(f"BUCKET_{logical.upper()}")


def series_prefix() -> str:
    """Name prefix of the time-series tables (`<prefix>-events-2026-11-22`): `TIMESERIES_PREFIX`,
    by default `hybridsync`, the prefix the stacks and the local app use."""
    return os.environ.get("TIMESERIES_PREFIX", "").strip() or "hybridsync"


def database_url() -> str:
    """`DATABASE_URL` when given (local tools, tests); else the URL of `database()`, with a password
    fetched now (an IAM token lasts 15 minutes: connect with it at once)."""
    if url := os.environ.get("DATABASE_URL", "").strip():
        return url
    where = database()
    return where.url(where.password())


@dataclass(frozen=True)
class Database:
    """Where and as whom a function connects, from the stacks' variables: through RDS Proxy with an
    IAM token for `DB_USER` (`DB_IAM_AUTH=true`: no password anywhere), or with the password of the
    secret `DB_SECRET_ARN` (an existing database without a proxy; the local app). Always TLS with
    the server's certificate and name verified (`verify-full`) against `DB_SSLROOTCERT`, by
    default certifi's roots, which hold the Amazon Root CAs RDS Proxy's certificates chain to."""

    host: str
    port: int
    name: str
    user: str
    iam: bool
    secret_arn: str | None
    root_certificate: str
    tls: str = "verify-full"  # `DB_SSLMODE`: only the local app, against a database of yours, sets it

    def password(self, fresh: bool = False) -> str:
        """An IAM token, or the secret's password (`fresh`: read again, not from the cache)."""
        if self.iam:
            from hybridsync.runtime import aws

            rds = aws.client("rds")
            return rds.generate_db_auth_token(self.host, self.port, self.user, rds.meta.region_name)
        try:
            return str(_secret(self.secret_arn or "", fresh)["password"])
        except KeyError:
            raise ConfigurationError("database secret lacks the field 'password'") from None

    def url(self, password: str) -> str:
        import sqlalchemy as sa

        tls = {"sslmode": self.tls, "sslrootcert": self.root_certificate}
        if self.host.startswith("/"):  # a Unix socket's folder (a local server): a parameter, not a host
            where = {"host": None, "port": None, "query": tls | {"host": self.host, "port": str(self.port)}}
        else:
            where = {"host": self.host, "port": self.port, "query": tls}
        return sa.URL.create(
            "postgresql+psycopg", username=self.user, password=password, database=self.name, **where
        ).render_as_string(hide_password=False)


def _secret(arn: str, fresh: bool = False) -> dict[str, object]:
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.exceptions import TransformParameterError

    try:
        secret = parameters.get_secret(arn, transform="json", max_age=300, force_fetch=fresh)
    except TransformParameterError:
        raise ConfigurationError("DB_SECRET_ARN does not hold a JSON secret") from None
    if not isinstance(secret, dict):
        raise ConfigurationError("DB_SECRET_ARN does not hold a JSON secret")
    return secret


def database() -> Database:
    """The database of the stacks' variables (see Database)."""
    iam = os.environ.get("DB_IAM_AUTH", "").lower() == "true"
    secret: dict[str, object] = {} if iam else _secret(required("DB_SECRET_ARN"))
    try:
        user = required("DB_USER") if iam else str(secret["username"])
        host = os.environ.get("DB_HOST") or str(secret["host"])
    except KeyError as missing:
        raise ConfigurationError(f"database secret lacks the field {missing}") from None
    port = os.environ.get("DB_PORT") or secret.get("port") or 5432
    name = os.environ.get("DB_NAME") or secret.get("dbname") or "postgres"
    root = os.environ.get("DB_SSLROOTCERT", "").strip()
    if not root:
        import certifi

        root = certifi.where()
    tls = os.environ.get("DB_SSLMODE", "").strip() or "verify-full"
    return Database(host, int(str(port)), str(name), user, iam, os.environ.get("DB_SECRET_ARN"), root, tls)


def authentication_failed(error: BaseException) -> bool:
    """Whether a connection failed on its credentials (a rotated password, an expired token)."""
    return "authentication failed" in str(error) or getattr(error, "sqlstate", None) == "28P01"


def tracing() -> bool:
    """Whether the function traces, as Powertools Tracer decides: in Lambda (`LAMBDA_TASK_ROOT`),
    unless POWERTOOLS_TRACE_DISABLED (the stacks set it by `-c tracing`)."""
    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() in ("true", "1")
    return bool(os.environ.get("LAMBDA_TASK_ROOT")) and not disabled
