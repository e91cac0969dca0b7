"""Time-series rotation (pattern 22), for every series the model declares: creates the tables of
the current and coming periods, lowers the capacity of past ones, archives the oldest to S3 and
drops them. Runs on a schedule, and at deploy as a custom resource so the current period's table
exists before the first write."""

import os
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.dynamodb import timeseries
from hybridsync.runtime import clients, handling, settings
from hybridsync.runtime.clients import dynamodb, model, s3

logger = Logger()
tracer = clients.tracer()
metrics = Metrics()


@handling.lambda_handler(logger, tracer, metrics)  # the doctor's probe first, then metrics, trace, log
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    prefix = settings.series_prefix()
    if event.get("RequestType") == "Delete":  # the stack goes: the data stays, never dropped here
        return {"PhysicalResourceId": event.get("PhysicalResourceId", f"timeseries-{prefix}")}
    done = timeseries.Rotation()
    for series in model().time_series:
        done.add(
            timeseries.rotate(
                dynamodb(),
                s3(),
                settings.bucket_name("bodies"),
                prefix,
                datetime.now(UTC),
                series,
                kms_key=os.environ.get("TIMESERIES_KMS_KEY_ARN") or None,
            )
        )
    for label in ("created", "lowered", "dropped"):
        metrics.add_metric(f"TimeSeriesTables{label.title()}", MetricUnit.Count, len(getattr(done, label)))
    logger.info("rotated the time-series tables", extra={"rotation": asdict(done)})
    if "RequestType" in event:  # CloudFormation, through the custom resource provider
        return {"PhysicalResourceId": f"timeseries-{prefix}"}
    return asdict(done)
