"""The operations function: loads, the aggregates' rebuild, reconcile, redrives and migrations run
inside the stack, next to the database (hybridsync.sync.operations; `hybridsync ... --deployed`)."""

from typing import Any

from aws_lambda_powertools import Logger

from hybridsync.runtime import aws, clients, handling
from hybridsync.runtime.clients import dynamodb, engine, model, tables
from hybridsync.sync import operations
from hybridsync.sync.jobs import Services

logger = Logger()
tracer = clients.tracer()


@handling.lambda_handler(logger, tracer)  # the doctor's probe first, then trace, log
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    services = Services(dynamodb(), engine(), model(), tables(), aws.client)
    logger.info(
        "operation",
        extra={"operation": event.get("operation"), "job": event.get("job"), "unit": event.get("unit")},
    )
    return operations.perform(services, event, lambda: context.get_remaining_time_in_millis() / 1000)
