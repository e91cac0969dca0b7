"""The probe `hybridsync doctor` sends a function: from inside the function (its network, its role,
its endpoints), one harmless call to each service it needs and a read of each secret it reads,
each classified. Every handler answers it before anything else (`answers`), so an operator learns
what a deployed function can reach without waiting for the traffic that would fail.

The event: {"hybridsync": "doctor", "services": ["dynamodbstreams", ...], "secrets": [...],
"database": true}: botocore service names; each secret an ARN or the name of a variable of the
function's own environment that holds one (or a JSON object of them, like `DB_ROLE_SECRETS`), so the
secrets read are the very ones the function's configuration names; `database`: log in as the
function does (its role, its TLS mode and trust store) and ask who it is (`"reader"`: through the
host of `DB_READER_HOST` instead, a proxy's read-only endpoint: a standby's secondary has no writer
its own host reaches until a failover). The answer says, per
service, `reached` (any HTTP answer, an access denial included: the route works), `unreachable` (no
connection within the connect timeout: the route is missing) or `error`; per secret, `readable` or
why not; for the database, `connected` or why not. It never holds a secret's value.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# the probe's event, and the handlers' answering it first, live where every handler can import them
# without this module (hybridsync.runtime.handling): the probe itself is imported when one arrives
from hybridsync.runtime.handling import EVENT_KEY, EVENT_VALUE, is_probe  # noqa: F401 (re-exported)
from hybridsync.runtime.handling import answers_the_doctor as answers  # noqa: F401 (re-exported)

CONNECT_TIMEOUT_S = 3  # a reachable endpoint connects in milliseconds; a missing route never does
READ_TIMEOUT_S = 10
# One call per service that needs no argument and changes nothing; any HTTP answer proves the route.
HARMLESS: dict[str, tuple[str, dict[str, Any]]] = {
    "dynamodb": ("list_tables", {"Limit": 1}),
    "dynamodbstreams": ("list_streams", {"Limit": 1}),
    "s3": ("list_buckets", {}),
    "secretsmanager": ("list_secrets", {"MaxResults": 1}),
    "lambda": ("list_functions", {"MaxItems": 1}),
    "sqs": ("list_queues", {"MaxResults": 1}),
    "sns": ("list_topics", {}),
    "kms": ("list_keys", {"Limit": 1}),
    "rds": ("describe_db_proxies", {"MaxRecords": 20}),
    "sts": ("get_caller_identity", {}),
    "cloudwatch": ("list_dashboards", {}),
    "events": ("list_event_buses", {"Limit": 1}),
    "logs": ("describe_log_groups", {"limit": 1}),
}


def client(service: str, endpoint: str | None = None) -> Any:
    """The client the function's own code would get (`hybridsync.runtime.aws.client`: the endpoints the
    stack gives, `AWS_ENDPOINT_URL_*` included), with short timeouts and one attempt: a retried
    connect timeout only multiplies the wait, and a probe measures the route, not the service."""
    from hybridsync.runtime import aws

    return aws.client(
        service,
        endpoint,
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "total_max_attempts": 1},
    )


def classify(error: BaseException | None) -> tuple[str, str]:
    """(outcome, detail) of one call: `reached` with no error or any service error, `unreachable`
    when no connection was made, `error` otherwise."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    if error is None:
        return "reached", "answered"
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "error")
        return "reached", f"answered {code} (the route works)"
    if isinstance(error, ConnectTimeoutError | EndpointConnectionError):
        return "unreachable", str(error)
    if isinstance(error, ReadTimeoutError | ConnectionClosedError):  # connected, then no answer
        return "error", f"connected but no answer: {error}"
    return "error", f"{type(error).__name__}: {error}"


def reach(service: str, make: Callable[[str], Any] = client) -> dict[str, Any]:
    started = time.monotonic()
    error: BaseException | None = None
    try:
        operation, params = HARMLESS.get(service) or _any_listing(make, service)
        getattr(make(service), operation)(**params)
    except Exception as failed:  # classified, never raised: one service's failure is one line
        error = failed
    outcome, detail = classify(error)
    return {"outcome": outcome, "detail": detail, "seconds": round(time.monotonic() - started, 3)}


def _any_listing(make: Callable[[str], Any], service: str) -> tuple[str, dict[str, Any]]:
    """A service not in HARMLESS: its first List/Describe operation that needs no argument."""
    from botocore import xform_name

    model = make(service).meta.service_model
    for name in model.operation_names:
        shape = model.operation_model(name).input_shape
        if name.startswith(("List", "Describe")) and not (shape and shape.required_members):
            return xform_name(name), {}
    raise ValueError(f"no argument-free List/Describe call of {service} to probe it with")


def secret_arns(wanted: list[str], environment: dict[str, str]) -> dict[str, str]:
    """label -> ARN of each secret asked for: an ARN as it is; a variable's value (each value of a
    JSON object, labelled `VARIABLE.key`). A variable the environment lacks maps to ''."""
    found: dict[str, str] = {}
    for item in wanted:
        if item.startswith("arn:"):
            found[item] = item
            continue
        value = environment.get(item, "")
        try:
            named = json.loads(value) if value.startswith("{") else None
        except ValueError:
            named = None
        if isinstance(named, dict):
            found |= {f"{item}.{key}": str(arn) for key, arn in named.items()}
        else:
            found[item] = value
    return found


def read_secret(arn: str, make: Callable[[str], Any] = client) -> dict[str, Any]:
    if not arn:
        return {"outcome": "missing", "detail": "the variable is not set in the function's environment"}
    try:
        make("secretsmanager").get_secret_value(SecretId=arn)  # the value is dropped at once
    except Exception as error:
        outcome, detail = classify(error)
        if outcome == "reached":  # Secrets Manager answered, and refused
            code = error.response["Error"]["Code"]  # type: ignore[attr-defined]
            message = error.response["Error"].get("Message", "")  # type: ignore[attr-defined]
            return {"outcome": "refused", "detail": f"{code}: {message}", "arn": arn}
        return {"outcome": outcome, "detail": detail, "arn": arn}
    return {"outcome": "readable", "detail": "GetSecretValue answered", "arn": arn}


def log_in(reader: bool = False) -> dict[str, Any]:
    """The function's own database login (`hybridsync.runtime.clients.engine`; `reader`: to the host
    of DB_READER_HOST): the route first, within the connect timeout (a missing route would otherwise
    hang until the function's timeout), then a login and `SELECT current_user`."""
    import dataclasses
    import socket

    from hybridsync.runtime import clients, settings

    started = time.monotonic()
    try:
        where = None if os.environ.get("DATABASE_URL") else settings.database()
        if reader:
            if where is None or not os.environ.get("DB_READER_HOST"):
                return {"outcome": "refused", "detail": "no DB_READER_HOST: no reader endpoint here",
                        "seconds": 0.0}  # fmt: skip
            where = dataclasses.replace(where, host=os.environ["DB_READER_HOST"])
        if where is not None and not where.host.startswith("/"):  # a Unix socket's folder: local only
            try:
                socket.create_connection((where.host, where.port), timeout=CONNECT_TIMEOUT_S).close()
            except OSError as error:
                return {"outcome": "unreachable", "detail": f"{where.host}:{where.port}: {error}",
                        "seconds": round(time.monotonic() - started, 3)}  # fmt: skip
        engine = clients.connected(where) if reader else clients.engine()
        with engine.connect() as conn:
            user = conn.exec_driver_sql("SELECT current_user").scalar()
        if reader:
            engine.dispose()
    except Exception as error:
        detail = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return {"outcome": "refused", "detail": f"{type(error).__name__}: {detail}",
                "seconds": round(time.monotonic() - started, 3)}  # fmt: skip
    return {"outcome": "connected", "detail": f"logged in as {user}",
            "seconds": round(time.monotonic() - started, 3)}  # fmt: skip


def _made(made: dict[str, Any], make: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda service: made[service] if service in made else make(service)


def probe(event: dict[str, Any], make: Callable[[str], Any] = client) -> dict[str, Any]:
    """Every service and secret of the event, at once (a function's timeout may be short)."""
    services = [str(s) for s in event.get("services") or []]
    secrets = secret_arns([str(s) for s in event.get("secrets") or []], dict(os.environ))
    # every client made here, one after another: a boto3 session is not safe to make clients from in
    # parallel (boto/boto3#1592), and a cold container's default session is not built yet
    made: dict[str, Any] = {}
    for service in {*services, *(["secretsmanager"] if secrets else [])}:
        try:
            made[service] = make(service)
        except Exception:  # an unknown service name: `reach` reports it when it asks again
            continue
    make = _made(made, make)
    with ThreadPoolExecutor(max_workers=max(1, len(services) + len(secrets) + 1)) as pool:
        reached = {s: pool.submit(reach, s, make) for s in services}
        read = {label: pool.submit(read_secret, arn, make) for label, arn in secrets.items()}
        login = pool.submit(log_in, event["database"] == "reader") if event.get("database") else None
        answer = {
            "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""),
            "services": {s: future.result() for s, future in reached.items()},
            "secrets": {label: future.result() for label, future in read.items()},
        }
        if login is not None:
            answer["database"] = login.result()
        return answer
