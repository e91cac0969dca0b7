"""HTTP API (API Gateway HTTP API): the project's routes (`[tool.hybridsync] routes`, loaded at
cold start; the stacks pass them as `HYBRIDSYNC_ROUTES`), and one error envelope for every error,
{"statusCode": N, "message": "..."}: 400 naming the bad field or parameter, 404, 405 with Allow,
409 for a conflict, 503 while PostgreSQL is down, 500 without a trace."""

import os
import re
from typing import Any

import sqlalchemy as sa
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import ServiceError
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync import __version__
from hybridsync.api import openapi
from hybridsync.api.web import ROUTES, app, error, get, logger, metrics, respond
from hybridsync.dynamodb.capacity import Meter
from hybridsync.model import config
from hybridsync.model.errors import ConfigurationError, Conflict, Invalid, NotFound, Rejected
from hybridsync.runtime import clients, handling
from hybridsync.runtime.clients import dynamodb

METER = Meter()
ROUTE_MODULES = config.hooks("routes")  # importing a module registers its routes


def document() -> dict[str, Any]:
    """The OpenAPI document of the project's routes (`hybridsync openapi` prints it)."""
    return openapi.document(f"{config.package_of()} HTTP API", __version__)


tracer = clients.tracer()


@get("/openapi.json", responses={200: "this API's OpenAPI 3.1 document"})
def openapi_document() -> Response:
    """This API's OpenAPI 3.1 document."""
    return respond(document())


if os.environ.get("API_DOCS_UI") == "true":  # a dev stack (-c dev=true): the document to try out

    @get("/docs", responses={200: "Swagger UI over /openapi.json (its scripts from a CDN)"})
    def swagger_ui() -> Response:
        """Swagger UI over this API's document (a dev stack only)."""
        return Response(200, "text/html", openapi.SWAGGER_UI)


@app.exception_handler(ServiceError)
def bad_request(failure: ServiceError) -> Response:
    return error(failure.status_code, str(failure.msg))


@app.exception_handler(Invalid)
def invalid(failure: Invalid) -> Response:
    return error(400, str(failure))


@app.exception_handler(Rejected)
def unstorable(failure: Rejected) -> Response:
    return error(400, failure.reason)  # a value a side cannot store (it names the field)


@app.exception_handler(sa.exc.DataError)
def refused_by_the_database(failure: sa.exc.DataError) -> Response:
    logger.warning("the database refused a value", extra={"error": str(failure.orig)[:200]})
    return error(
        400, f"the database cannot store a value of this request: {str(failure.orig).splitlines()[0]}"
    )


@app.exception_handler(NotFound)
def not_found(failure: NotFound) -> Response:
    return error(404, str(failure))


@app.exception_handler(Conflict)
def conflict(failure: Conflict) -> Response:
    metrics.add_metric("Conflict", MetricUnit.Count, 1)
    return error(409, str(failure))


@app.exception_handler(sa.exc.OperationalError)
def database_unavailable(failure: Exception) -> Response:
    logger.exception("database unavailable")
    metrics.add_metric("DatabaseUnavailable", MetricUnit.Count, 1)
    return error(503, "database unavailable, retry later")


@app.exception_handler(ConfigurationError)
def misconfigured(failure: ConfigurationError) -> Response:
    logger.error(f"misconfigured: {failure}")  # names the variable or secret field to fix
    metrics.add_metric("Misconfigured", MetricUnit.Count, 1)
    return error(500, "the service is misconfigured; its log says what to fix")


@app.exception_handler(Exception)
def internal_error(failure: Exception) -> Response:
    logger.exception("unhandled error")  # the trace goes to the log, never to the client
    return error(500, "internal error")


def _allowed(path: str) -> set[str]:
    return {
        method
        for rule, methods in ROUTES.items()
        if re.fullmatch(re.sub(r"<\w+>", "[^/]+", rule), path)
        for method in methods
    }


@app.not_found
def unknown_route(_: Exception) -> Response:
    path = app.current_event.path
    if allowed := _allowed(path):
        methods = ", ".join(sorted(allowed))
        return error(
            405,
            f"{app.current_event.http_method} is not allowed on {path!r}; use {methods}",
            {"Allow": methods},
        )
    return error(404, f"no route {path!r}")


@handling.lambda_handler(logger, tracer, metrics)  # the doctor's probe first, then metrics, trace, log
def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    METER.attach(dynamodb())
    try:
        return app.resolve(event, context)
    finally:  # what the request cost: the model's figure beside DynamoDB's own
        spent = METER.reset()
        request = f"{event.get('requestContext', {}).get('http', {}).get('method')} {event.get('rawPath')}"
        logger.info("capacity", extra={"request": request, **spent.as_dict()})
