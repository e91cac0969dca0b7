"""Configuration from the environment the stacks set, validated with errors that name the variable."""

from __future__ import annotations

import logging
import os

# botocore's DEBUG lines carry whole request and response bodies: a secret's value, every item
# read. Whatever level a function's logging is turned to, they stay off (a test turns logging to
# DEBUG, reads the database secret and greps every line for the password).
for _name in ("botocore", "boto3", "urllib3"):
    logging.getLogger(_name).setLevel(max(logging.getLogger(_name).level, logging.INFO))


class ConfigurationError(RuntimeError):
    pass


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
    """`DATABASE_URL` when given (local, tests); in AWS the Secrets Manager secret `DB_SECRET_ARN`,
    reached through `DB_HOST` (the RDS Proxy) when the stack sets it."""
    if url := os.environ.get("DATABASE_URL", "").strip():
        return url
    import sqlalchemy as sa
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.exceptions import TransformParameterError

    try:
        secret = parameters.get_secret(required("DB_SECRET_ARN"), transform="json", max_age=300)
    except TransformParameterError:
        raise ConfigurationError("DB_SECRET_ARN does not hold a JSON secret") from None
    if not isinstance(secret, dict):
        raise ConfigurationError("DB_SECRET_ARN does not hold a JSON secret")
    try:
        url = sa.URL.create(
            "postgresql+psycopg",
            username=secret["username"],
            password=secret["password"],
            host=os.environ.get("DB_HOST") or secret["host"],
            port=int(secret.get("port", 5432)),
            database=os.environ.get("DB_NAME") or secret.get("dbname") or "postgres",
            query={"sslmode": "require"},
        )
    except KeyError as missing:
        raise ConfigurationError(f"database secret lacks the field {missing}") from None
    return url.render_as_string(hide_password=False)


def tracing() -> bool:
    """Whether the function traces, as Powertools Tracer decides: in Lambda (`LAMBDA_TASK_ROOT`),
    unless POWERTOOLS_TRACE_DISABLED (the stacks set it by `-c tracing`)."""
    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() in ("true", "1")
    return bool(os.environ.get("LAMBDA_TASK_ROOT")) and not disabled
