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
    "existing_db_secret_arn": Setting(None, "use your PostgreSQL, named by its admin's Secrets Manager "
                                            "secret (host, port, username, password, dbname), instead of "
                                            "Aurora; needs the three settings of its network below"),
    "existing_db_vpc_id": Setting(None, "the VPC your database lives in (the SQL functions run there)"),
    "existing_db_subnet_ids": Setting(None, "comma-separated private subnets of that VPC for the functions"),
    "existing_db_security_group_id": Setting(None, "your database's security group (the functions, the "
                                                   "proxy and the rotation are let in on its port)"),
    "existing_db_port": Setting(5432, "your database's port"),
    "existing_db_name": Setting("postgres", "your database's name, for logins through the proxy"),
    "existing_db_endpoints": Setting(True, "interface endpoints (Secrets Manager, DynamoDB, DynamoDB "
                                           "Streams, S3, Lambda) in those subnets; false when the VPC "
                                           "already reaches them (`hybridsync doctor --deployed` checks)"),
    "existing_db_streams_endpoint": Setting(None, "with `existing_db_endpoints=false` and no NAT: the URL of "
                                                  "your DynamoDB Streams interface endpoint "
                                                  "(`https://vpce-....streams.dynamodb.<region>.vpce.amazonaws.com`)"),
    "existing_db_proxy": Setting(False, "put an RDS Proxy in front of your database (IAM logins; needs "
                                        "`existing_db_instance_id` or `existing_db_cluster_id`)"),
    "existing_db_instance_id": Setting(None, "the proxy's target: your RDS for PostgreSQL instance"),
    "existing_db_cluster_id": Setting(None, "the proxy's target: your Aurora PostgreSQL cluster"),
    "db_root_certificates": Setting(None, "the PEM bundle the functions that reach the database straight "
                                          "trust (RDS's `global-bundle.pem`, a file of the project or of "
                                          "its package); required with `existing_db_secret_arn`"),
    "db_rotation_days": Setting(30, "every database password (the admin's, each role's) is rotated this "
                                    "often by Secrets Manager"),
    "kms_key_arn": Setting(None, "a customer-managed KMS key for the tables (time series included), "
                                 "queues, buckets, secrets and the cluster; the alarm topic gets a key "
                                 "of its own whose policy lets CloudWatch use it. Pins the stacks to "
                                 "the key's account and region"),
    "replica_regions": Setting(None, "comma-separated Regions every table without replicas of its own "
                                     "is also a replica in (a global table, version 2019.11.21); the "
                                     "engine's consumers run in the home Region only"),
    "home_region": Setting(None, "with replicas, required: the Region the stacks deploy to, where "
                                 "PostgreSQL's writer and every consumer run (never the CLI profile's: "
                                 "the stacks must not follow whoever runs synth)"),
    "standby": Setting(None, "with replicas: per replica Region, what its standby stack (`<prefix>-standby-"
                             "<region>`, the consumers idle until a failover) is built from, and which "
                             "one consumes since a deployed failover; written into cdk.json by "
                             "`hybridsync standby REGION` and `hybridsync failover --deployed`"),
    "max_read_request_units": Setting(None, "on-demand maximum reads per second: N for every table and "
                                            "GSI, or `table=N,table/index=N,...`"),
    "max_write_request_units": Setting(None, "on-demand maximum writes per second, as "
                                             "`max_read_request_units`"),
    "tracing": Setting(True, "X-Ray active tracing on every function (Powertools Tracer: DynamoDB and "
                             "PostgreSQL calls as subsegments)"),
    "pipeline_enabled": Setting(True, "false: the stream mappings and the outbox schedule are disabled, "
                                      "their positions kept (deploy a fix while nothing consumes)"),
    "public_api": Setting(False, "the HTTP API without IAM authorization (anyone may call it)"),
    "timeseries_prefix": Setting("the prefix, lower case", "the name prefix of the time series' daily "
                                 "tables (stacks of different prefixes never rotate or drop each other's)"),
    "log_retention_days": Setting(30, "how long the functions', the API's and the deploy's log groups "
                                      "keep their logs (CloudWatch's durations: 1, 3, 5, 7, 14, 30, ...)"),
    "backup_retention_days": Setting(7, "how long Aurora keeps its automated backups (1-35)"),
    "aurora_min_acu": Setting(0.5, "Aurora Serverless v2's minimum capacity (ACU)"),
    "aurora_max_acu": Setting(4.0, "Aurora Serverless v2's maximum capacity (ACU: `hybridsync plan`)"),
    # freshness: how soon a change is seen on the other side, against what it costs
    "freshness": Setting("realtime", "`realtime`: every consumer takes a change as soon as Lambda reads it "
                         "(no batching windows) and the outbox drain polls PostgreSQL for its whole "
                         "run; `economy`: windows of 5 s (write-back) and 30 s (aggregation) fill "
                         "bigger batches and the drain runs once a minute (`hybridsync plan` prices "
                         "both; docs: Freshness)"),
    # the stream mappings
    "stream_batch_size": Setting(1000, "write-back: records per invocation (DynamoDB streams allow 10,000)"),
    "stream_batching_window_s": Setting(None, "write-back: wait up to this long to fill a batch; unset: 0 "
                                        "with freshness=realtime, 5 with economy"),
    "aggregate_batch_size": Setting(5000, "aggregation: records per invocation (deltas collapse per item "
                                          "before any write; 5,000 stay under Lambda's 6 MB payload)"),
    "aggregate_batching_window_s": Setting(None, "aggregation: wait up to this long to fill a batch "
                                           "(top-N may lag by it); unset: 0 with freshness=realtime, "
                                           "30 with economy"),
    "aggregate_tumbling_window_s": Setting(60, "aggregation: the tumbling window (it makes Lambda pass the "
                                               "shard id, the key of the exactly-once cursor)"),
    "stream_retry_attempts": Setting(10, "retries of a failing batch, then the batch, its records "
                                         "included, goes to the failure bucket"),
    "stream_max_record_age_h": Setting(24, "the oldest record a mapping delivers (a stream keeps 24 h)"),
    "change_source": Setting("dynamodb", "where the stream consumers read a table's changes: `dynamodb` "
                             "(its DynamoDB stream) or `kinesis` (Kinesis Data Streams for DynamoDB: "
                             "room for your own consumers, up to a year of history); a table's "
                             "`change_source` wins"),
    "kinesis_shards": Setting(None, "kinesis: the stream's provisioned shards; unset: on-demand capacity"),
    "kinesis_retention_h": Setting(24, "kinesis: how long the stream keeps records (24-8760 hours)"),
    "kinesis_fan_out": Setting(True, "kinesis: each engine consumer reads through an enhanced fan-out "
                               "consumer of its own (2 MB/s per shard each); false: shared throughput"),
    "iterator_age_alarm_s": Setting(300, "critical alarm when a consumer is this far behind its stream"),
    "iterator_age_warning_s": Setting(60, "warning alarm when a consumer is this far behind its stream"),
    "failed_batch_retention_days": Setting(30, "failed batches (their records) kept in the failure "
                                              "bucket this long, then expired"),
    # the functions
    "outbox_drain_minutes": Setting(1, "how often the schedule starts the SQL -> DynamoDB drain (it can "
                                       "also be invoked); with freshness=realtime each run polls the "
                                       "outbox until the next one takes over"),
    "outbox_poll_ms": Setting(250, "freshness=realtime: how often the running drain looks at the outbox"),
    "outbox_age_alarm_s": Setting(300, "alarm when a PostgreSQL change waited this long"),
    "sweep_hours": Setting(24, "how often orphaned large bodies are swept"),
    "sweep_grace_s": Setting(900, "a body younger than this may belong to a write in progress"),
    "api_reserved_concurrency": Setting(20, "the API's share of the account's concurrency (it must not "
                                            "starve PostgreSQL); 0: none reserved"),
    "sql_sync_reserved_concurrency": Setting(None, "the drain's reserved concurrency; unset: 2 with "
                                                   "freshness=realtime (the running drain and the one "
                                                   "taking over from it), 1 with economy; 0: none"),
    "rotate_hours": Setting(6, "how often the time-series tables are rotated (each period's is made ahead)"),
    "migration_lock_timeout_s": Setting(10, "a migration waits this long for a table's lock, then fails "
                                            "(and the deploy with it) instead of queueing the app's writes"),
    # alarms (each alarm's action, ALARM and OK, is the alarm topic)
    "alarm_topic_arn": Setting(None, "send alarms to this SNS topic of yours instead of the stack's own"),
    "alarm_email": Setting(None, "subscribe this address to the alarm topic"),
    "function_errors_alarm": Setting(0, "alarm when a function fails more than this often in 5 minutes"),
    "failure_queue_age_alarm_s": Setting(3600, "alarm when a failed scheduled run waited this long "
                                               "(the queue keeps 14 days)"),
    "api_latency_p99_alarm_ms": Setting(3000, "alarm when the API's p99 latency passes this (5 minutes)"),
    "api_5xx_alarm": Setting(0, "alarm when the API answers more 5xx than this in 5 minutes"),
    "proxy_borrow_latency_alarm_ms": Setting(100, "alarm when RDS Proxy takes this long to lend a "
                                                  "connection (average, 5 minutes)"),
    "acu_utilization_alarm_pct": Setting(90, "alarm when Aurora runs at this share of its ACU cap"),
    "freshness_p99_alarm_s": Setting(None, "alarm when a direction's p99 freshness (a write, until the "
                                           "other side holds it) passes this many seconds over 5 minutes; "
                                           "unset: 5 with freshness=realtime, 120 with economy"),
}  # fmt: skip


def read(scope: Any, name: str) -> Any:
    """A setting as the CDK context gives it (`-c name=value`, `cdk.json`), else its default; a
    boolean default makes the value a boolean ("false", "0", "no" are false)."""
    value = scope.node.try_get_context(name)
    default = SETTINGS[name].default
    if value is None or value == "":
        return default
    if isinstance(default, bool):
        return str(value).lower() in ("true", "1", "yes")
    if isinstance(default, float):
        return float(value)
    return int(value) if isinstance(default, int) else value


FRESHNESS = ("realtime", "economy")
# what an unset setting is under each freshness: realtime at the platform's own cadence (Lambda polls a
# DynamoDB stream shard 4 times a second, with-ddb.html), economy buying bigger batches with waits
BY_FRESHNESS: dict[str, dict[str, int]] = {
    "stream_batching_window_s": {"realtime": 0, "economy": 5},
    "aggregate_batching_window_s": {"realtime": 0, "economy": 30},
    "sql_sync_reserved_concurrency": {"realtime": 2, "economy": 1},
    "freshness_p99_alarm_s": {"realtime": 5, "economy": 120},
}


def freshness(scope: Any) -> str:
    """`-c freshness`: "realtime" or "economy"."""
    value = str(read(scope, "freshness")).lower()
    if value not in FRESHNESS:
        raise ValueError(f"-c freshness={value}: one of {', '.join(FRESHNESS)}")
    return value


def by_freshness(scope: Any, name: str) -> int:
    """A setting of `BY_FRESHNESS`: as given, else what the freshness setting makes it."""
    value = read(scope, name)
    return int(value) if value is not None else BY_FRESHNESS[name][freshness(scope)]


def names(scope: Any) -> str:
    """What the names the engine derives start with: the stack prefix in lower case (`hybridsync`
    for the default one): the metrics' namespace and each function's service, the time series'
    tables, the API's and the topic's names. Two prefixes in one account never share one."""
    return str(scope.node.try_get_context("prefix") or SETTINGS["prefix"].default).lower()


def log_retention(scope: Any) -> Any:
    """`log_retention_days` as CloudWatch Logs' retention (only its own durations are allowed)."""
    from aws_cdk import aws_logs as logs

    days = int(read(scope, "log_retention_days"))
    allowed = {1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
               60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS",
               180: "SIX_MONTHS", 365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS",
               731: "TWO_YEARS", 1827: "FIVE_YEARS", 3653: "TEN_YEARS"}  # fmt: skip
    if days not in allowed:
        raise ValueError(
            f"-c log_retention_days={days}: CloudWatch Logs keeps logs one of {sorted(allowed)} days"
        )
    return logs.RetentionDays[allowed[days]]


def change_source(scope: Any, table: Any) -> str:
    """Where `table`'s (hybridsync.model.declare.Table) changes are read from: its own
    `change_source`, else `-c change_source`; "dynamodb" or "kinesis"."""
    from hybridsync.model.declare import CHANGE_SOURCES

    source = table.change_source or str(read(scope, "change_source")).lower()
    if source not in CHANGE_SOURCES:
        raise ValueError(f"-c change_source={source}: one of {', '.join(CHANGE_SOURCES)}")
    return source


def replicas(scope: Any, table: Any) -> tuple[str, ...]:
    """The Regions `table` (hybridsync.model.declare.Table) is also a replica in: its own
    `replicas`, else `-c replica_regions`; () for a table of one Region."""
    from hybridsync.model.declare import regions

    if table.replicas:
        return table.replicas  # checked when declared
    return regions(str(read(scope, "replica_regions") or ""), "-c replica_regions")


def standbys(scope: Any) -> dict[str, Any]:
    """`-c standby` by Region (JSON on the command line, an object in cdk.json); {} if unset."""
    import json

    given = read(scope, "standby")
    entries = json.loads(given) if isinstance(given, str) else given or {}
    if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
        raise ValueError("-c standby: a JSON object of Regions, as `hybridsync standby REGION` writes it")
    return entries


def active_standby(scope: Any) -> str | None:
    """The Region whose standby consumes since a deployed failover (its entry's `active`), else None:
    home's pipeline deploys disabled then, and that standby's enabled."""
    active = sorted(region for region, entry in standbys(scope).items() if entry.get("active"))
    if len(active) > 1:
        raise ValueError(f"-c standby: {' and '.join(active)} are both active: one Region consumes at a time")
    return active[0] if active else None
