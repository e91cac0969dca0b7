"""Every setting the stacks read from the CDK context (`cdk deploy -c name=value`, or `cdk.json`),
with its default and what it means: one declaration, which the stacks read and the docs' settings
reference is generated from (a test fails when a stack reads a key this does not declare)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    default: Any
    means: str


SETTINGS: dict[str, Setting] = {
    # the deployment
    "model": Setting("[tool.hybridsync] model", "the model to deploy, `package.module:MODEL`"),
    "prefix": Setting("HybridSync", "the stacks' names (`<prefix>-data`, `-database`, `-pipeline`, `-api`)"),
    "dev": Setting(False, "a throw-away stack: tables and the database are destroyed with it, no "
                          "deletion protection; the API serves Swagger UI at `/docs`"),
    "existing_db_secret_arn": Setting(None, "use your PostgreSQL, named by a Secrets Manager secret "
                                            "(host, port, username, password, dbname), instead of Aurora"),
    "tracing": Setting(False, "X-Ray active tracing on every function"),
    "public_api": Setting(False, "the HTTP API without IAM authorization (anyone may call it)"),
    "timeseries_prefix": Setting("hybridsync", "the name prefix of the time series' daily tables"),
    # the stream mappings
    "stream_batch_size": Setting(1000, "write-back: records per invocation (DynamoDB streams allow 10,000)"),
    "stream_batching_window_s": Setting(5, "write-back: wait up to this long to fill a batch"),
    "aggregate_batch_size": Setting(5000, "aggregation: records per invocation (deltas collapse per item "
                                          "before any write; 5,000 stay under Lambda's 6 MB payload)"),
    "aggregate_batching_window_s": Setting(30, "aggregation: wait up to this long to fill a batch "
                                               "(top-N may lag by it)"),
    "aggregate_tumbling_window_s": Setting(60, "aggregation: the tumbling window (it makes Lambda pass the "
                                               "shard id, the key of the exactly-once cursor)"),
    "stream_retry_attempts": Setting(10, "retries of a failing batch, then its metadata goes to the "
                                         "failure queue"),
    "stream_max_record_age_h": Setting(24, "the oldest record a mapping delivers (a stream keeps 24 h)"),
    "iterator_age_alarm_s": Setting(300, "alarm when a consumer is this far behind its stream"),
    # the functions
    "outbox_drain_minutes": Setting(1, "how often the SQL -> DynamoDB drain runs (it can also be invoked)"),
    "outbox_age_alarm_s": Setting(300, "alarm when a PostgreSQL change waited this long"),
    "sweep_hours": Setting(24, "how often orphaned large bodies are swept"),
    "sweep_grace_s": Setting(900, "a body younger than this may belong to a write in progress"),
    "api_reserved_concurrency": Setting(20, "the API's share of the account's concurrency (it must not "
                                            "starve PostgreSQL); 0: none reserved"),
    "sql_sync_reserved_concurrency": Setting(1, "one outbox drain at a time; 0: none reserved"),
    "rotate_hours": Setting(6, "how often the time-series tables are rotated (each period's is made ahead)"),
}  # fmt: skip
