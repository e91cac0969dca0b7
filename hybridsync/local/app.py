"""The synthesized app, running locally: every table, function, event source mapping, HTTP route and
schedule of `cdk.out`, against embedded (or given) DynamoDB and PostgreSQL. Nothing here lists the
app's parts a second time: all of it is read from the templates."""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hybridsync.cdk import rules
from hybridsync.local import create_table
from hybridsync.local.apigateway import responses as apigateway
from hybridsync.local.awslambda import mappings
from hybridsync.local.awslambda.functions import FunctionError, LocalFunction
from hybridsync.local.awslambda.mappings import (
    POLL_INTERVAL_S,
    Checkpoints,
    MappingStats,
    Settings,
    ShardPoller,
    ShardReader,
)
from hybridsync.local.awslambda.responses import LambdaApi, Switch
from hybridsync.local.cloudwatch.alarms import Alarm, Alarms, Metrics, Topic, percentiles_s
from hybridsync.local.dynamodb.shards import READERS_PER_SHARD, ShardView, StreamsServer, Topology
from hybridsync.local.dynamodb.ttl import Expiries, TtlSweeper
from hybridsync.local.faults import FaultPlan, Faults
from hybridsync.local.iam import policies as iam
from hybridsync.local.kinesis import models as kds
from hybridsync.local.postgres.logins import Logins
from hybridsync.local.template import ACCOUNT, Assembly, Resource, TemplateError
from hybridsync.runtime import aws
from hybridsync.streams import filters

log = logging.getLogger(__name__)
TABLE_TYPES = ("AWS::DynamoDB::GlobalTable", "AWS::DynamoDB::Table")
STREAM_READ = (
    "GetRecords",
    "GetShardIterator",
    "DescribeStream",
    "ListStreams",
)  # what a stream mapping needs
ASYNC_RETRIES = 2  # Lambda's default for asynchronous invocations (MaximumRetryAttempts)
RATE = rules.RATE  # an EventBridge rate expression
DEPLOYED_ENDPOINTS = "AWS_ENDPOINT_URL_"  # botocore's per-service endpoints: deployed VPC endpoint names
# each direction's freshness (the `Freshness` metric, ms), by the function that emits it: DynamoDB ->
# PostgreSQL row, DynamoDB -> aggregate, PostgreSQL -> DynamoDB
FRESHNESS = {"write_back": "WriteBack", "aggregate": "Aggregate", "sql_sync": "SqlSync"}
FRESHNESS_WINDOW_S = 300  # what `status` summarizes: the alarms' period


def table_name(prefix: str, table: Resource) -> str:
    """`hybridsync-main` for the model's table `main` (the data stack writes the name into the
    table's metadata): stable, so data and `.local/env` carry over."""
    return (
        f"{prefix}-{table.metadata.get('hybridsync:table') or table.construct.removesuffix('Table').lower()}"
    )


def _create_request(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """The CreateTable call of a synthesized table (on demand: capacity means nothing locally)."""

    def keys(schema: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{"AttributeName": k["AttributeName"], "KeyType": k["KeyType"]} for k in schema]

    request: dict[str, Any] = {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": keys(properties["KeySchema"]),
        "AttributeDefinitions": properties["AttributeDefinitions"],
    }
    if indexes := properties.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = [
            {"IndexName": i["IndexName"], "KeySchema": keys(i["KeySchema"]), "Projection": i["Projection"]}
            for i in indexes
        ]
    if stream := properties.get("StreamSpecification"):
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return request


class LocalApp:
    """Build with `LocalApp(assembly, endpoints...)`, then `start()` / `stop()`."""

    def __init__(
        self,
        assembly: Assembly,
        *,
        dynamodb_endpoint: str,
        services_endpoint: str,
        database_url: str,
        state_dir: Path,
        prefix: str = "hybridsync",
        region: str = aws.LOCAL_REGION,
        faults: FaultPlan | None = None,
        iam: bool = True,
        shards: int = 1,
        shard_lifetime_s: float | None = None,
        shard_records: int | None = None,
        retention_s: float | None = None,
        alarm_period_s: int | None = None,
    ):
        self.assembly, self.state_dir, self.prefix, self.region = assembly, state_dir, prefix, region
        self.iam = iam  # each function's calls checked against its role (local/iam/policies.py)
        # Streams as production has them (local/dynamodb/shards.py): N shards, rollover, trimming; else
        # DynamoDB Local's own single shard per table, read directly.
        if shards < 1 or (shard_lifetime_s is not None and shard_lifetime_s <= 0) or (shard_records or 1) < 1:
            raise ValueError("shards must be at least 1, and a shard's lifetime and records positive")
        if retention_s is not None and retention_s <= 0:
            raise ValueError("the retention must be positive")
        self.shard_count, self.shard_lifetime_s, self.retention_s = shards, shard_lifetime_s, retention_s
        self.shard_records = shard_records
        knobs = (shard_lifetime_s, shard_records, retention_s)
        self.sharded = shards > 1 or any(knob is not None for knob in knobs)
        self.topologies: dict[str, Topology] = {}  # stream ARN -> its shards, when sharded
        self.streams_server: StreamsServer | None = None
        # TTL for every expired item, whatever DynamoDB Local does (local/dynamodb/ttl.py)
        self.expiries = Expiries(state_dir / "ttl-deletions.jsonl", keep_s=retention_s or 24 * 3600)
        self.sweepers: list[TtlSweeper] = []
        self._plans: dict[str, list[dict[str, Any]]] = {}  # stream ARN -> its mappings, when sharded
        self._partition_keys: dict[str, str] = {}  # stream ARN -> its table's partition key
        self.dynamodb_endpoint, self.database_url = dynamodb_endpoint, database_url
        self.services_endpoint = services_endpoint  # S3, SQS (moto server)
        self.client = aws.client("dynamodb", dynamodb_endpoint, region)
        self.functions: dict[str, LocalFunction] = {}
        self.custom_resources: list[str] = []  # those run at start, as a deploy runs them
        self.pollers: list[ShardPoller] = []
        self.mapping_stats: dict[str, MappingStats] = {}
        self.mapping_functions: dict[str, str] = {}
        self.mapping_settings: dict[str, Settings] = {}
        self.mapping_sources: dict[str, str] = {}  # mapping -> its stream ARN
        self.switches: dict[str, Switch] = {}  # mapping -> enabled or not (the local Lambda API)
        self.account = ACCOUNT
        self.lambda_api: LambdaApi | None = None
        self.queues: dict[str, str] = {}  # queue name -> URL
        self.tables: dict[str, str] = {}  # construct -> physical name
        self.table_names: dict[str, str] = {}  # the model's name -> physical name
        self.buckets: dict[str, str] = {}  # construct -> physical name
        self.http: ThreadingHTTPServer | None = None
        self.faults = Faults(faults) if faults and faults.active else None  # on stream deliveries
        self.metrics = Metrics()  # what CloudWatch would hold (local/cloudwatch/alarms.py)
        self.alarms: Alarms | None = None
        if alarm_period_s is not None and alarm_period_s < 1:
            raise ValueError("the alarm period must be at least 1 s")
        self.alarm_period_s = alarm_period_s
        self.failed_batches_bucket: str | None = None  # the stream mappings' on-failure bucket
        # Kinesis Data Streams for DynamoDB (local/kinesis/models.py): each table's destination and its pump
        self._destinations: dict[str, dict[str, Any]] = {}  # table -> its KinesisStreamSpecification
        self.pumps: dict[str, kds.Pump] = {}  # Kinesis stream ARN -> the pump that fills it
        self._fresh_streams: set[str] = set()  # Kinesis streams made by this run: saved positions void
        self._kinesis_mappings: set[str] = set()
        self._kinesis = aws.client("kinesis", services_endpoint, region)
        self.checkpoints = Checkpoints(state_dir / "positions.json")  # one for the file: pumps and mappings
        self._rule_templates: Any = None  # the deploy rules' view of the templates (network())
        self._customer_keys: dict[str, str] | None = None  # resource -> its customer key (keys_for())
        self._stores: tuple[dict[str, int], int] | None = None  # the last _sample_stores()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._logs: list[Any] = []
        self._name_things()

    # --- what the template holds --------------------------------------------------------------

    def _name_things(self) -> None:
        """Local names and ARNs of everything, before anything is created (references resolve)."""
        a = self.assembly
        for proxy in a.resources("AWS::RDS::DBProxy"):  # what its grants name (the proxy is not emulated)
            arn = f"arn:aws:rds:{self.region}:{ACCOUNT}:db-proxy:prx-{proxy.construct.lower()}"
            a.set(proxy, DBProxyArn=arn, Endpoint="127.0.0.1")
        secrets = aws.client("secretsmanager", self.services_endpoint, self.region)
        self.logins = Logins(a, secrets, self.database_url, self.prefix)
        for table in (t for kind in TABLE_TYPES for t in a.resources(kind)):
            name = table_name(self.prefix, table)
            self.tables[table.construct] = name
            self.table_names[name.removeprefix(f"{self.prefix}-")] = name
            a.set(table, Ref=name, Arn=f"arn:aws:dynamodb:{self.region}:{ACCOUNT}:table/{name}")
        for stream in a.resources("AWS::Kinesis::Stream"):
            name = (
                a.resolve(stream.stack, stream.properties.get("Name")) or f"{self.prefix}-{stream.construct}"
            )
            a.set(stream, Ref=name, Arn=f"arn:aws:kinesis:{self.region}:{ACCOUNT}:stream/{name}")
        for consumer in a.resources("AWS::Kinesis::StreamConsumer"):  # as moto names it (AWS adds `:<time>`)
            name = a.resolve(consumer.stack, consumer.properties["ConsumerName"])
            arn = f"{a.resolve(consumer.stack, consumer.properties['StreamARN'])}/consumer/{name}"
            a.set(consumer, Ref=arn, ConsumerARN=arn, ConsumerName=name)
        for queue in a.resources("AWS::SQS::Queue"):
            name = f"{self.prefix}-{queue.construct}"
            a.set(
                queue,
                QueueName=name,
                Arn=f"arn:aws:sqs:{self.region}:{ACCOUNT}:{name}",
                Ref=f"{self.services_endpoint}/{ACCOUNT}/{name}",
            )
        for bucket in a.resources("AWS::S3::Bucket"):
            name = f"{self.prefix}-{bucket.construct}".lower()  # bucket names are lower case
            self.buckets[bucket.construct] = name
            a.set(bucket, Ref=name, Arn=f"arn:aws:s3:::{name}")
        for integration in a.resources("AWS::ApiGatewayV2::Integration"):
            a.set(integration, Ref=integration.logical_id)
        for function in self.python_functions():
            a.set(
                function,
                Ref=function.construct,
                Arn=f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{function.construct}",
            )
        for alias in a.resources("AWS::Lambda::Alias"):  # Ref: the alias's ARN, `<function ARN>:live`
            function = a.resolve(alias.stack, alias.properties["FunctionName"])
            qualified = (
                f"arn:aws:lambda:{self.region}:{ACCOUNT}:function:{function}:{alias.properties['Name']}"
            )
            a.set(alias, Ref=qualified, Arn=qualified)
        for api in a.resources("AWS::ApiGatewayV2::Api"):
            a.set(api, Ref=api.logical_id)
        for topic in a.resources("AWS::SNS::Topic"):
            a.set(topic, Ref=f"arn:aws:sns:{self.region}:{ACCOUNT}:{self.prefix}-{topic.construct}")
        for key in a.resources("AWS::KMS::Key"):  # a key the templates make (its policy is theirs too)
            key_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.prefix}/{key.stack}/{key.logical_id}"))
            a.set(key, Ref=key_id, Arn=f"arn:aws:kms:{self.region}:{ACCOUNT}:key/{key_id}", KeyId=key_id)
        for alias in a.resources("AWS::KMS::Alias"):
            a.set(alias, Ref=alias.properties["AliasName"])

    def ensure_logins(self) -> None:
        """The database's logins with their secrets' passwords (the Users resource), for a function
        run on its own (`hybridsync invoke`)."""
        self._run_custom_resources(only={"DatabaseUsers"})

    def python_functions(self) -> list[Resource]:
        """The app's own functions: Python handlers shipped as assets (not CDK's framework ones)."""
        return [
            f
            for f in self.assembly.resources("AWS::Lambda::Function")
            if str(f.properties.get("Runtime", "")).startswith("python") and "aws:asset:path" in f.metadata
        ]

    def function_environment(self, function: Resource) -> dict[str, str]:
        # a deployed interface endpoint's name (AWS_ENDPOINT_URL_DYNAMODB_STREAMS, from its DnsEntries)
        # means nothing here: the local endpoints below stand for it
        template = function.properties.get("Environment", {}).get("Variables", {})
        kept = {k: v for k, v in template.items() if not k.startswith(DEPLOYED_ENDPOINTS)}
        variables = self.assembly.resolve(function.stack, kept)
        env = {k: str(v) for k, v in variables.items() if v is not None}
        env = self.logins.environment(env)  # its login's secret, on the local server
        deployed = env.get("TIMESERIES_PREFIX")
        if deployed:  # tables a function creates are named like the app's own
            env["TIMESERIES_PREFIX"] = self.prefix
        if self.faults:
            env |= self.faults.plan.worker_environment()
        if self.retention_s is not None:  # the aggregation's bookkeeping lives as long as the records
            env["STREAM_RETENTION_S"] = str(int(self.retention_s))
        if self.iam:
            role, statements = self.role(function)
            if deployed:  # its grants name those tables by the deployed prefix: the same rename
                statements = json.loads(
                    json.dumps(statements).replace(f":table/{deployed}-", f":table/{self.prefix}-")
                )
            policy = {
                "role": role,
                "function": function.construct,
                "region": self.region,
                "account": ACCOUNT,
                "statements": statements,
                "keys": self.keys_for(function),
            }
            env["HYBRIDSYNC_IAM"] = json.dumps(policy)
        if (route := self.network(function)) is not None:  # local/vpc/network.py: its VPC's routes
            env["HYBRIDSYNC_NETWORK"] = json.dumps(route)
        return env | {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_LAMBDA_FUNCTION_NAME": function.construct,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.properties.get("MemorySize", 128)),
            "DYNAMODB_ENDPOINT": self.dynamodb_endpoint,
            "AWS_ENDPOINT": self.services_endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": self.services_endpoint,
            **({"LAMBDA_ENDPOINT": self.lambda_api.endpoint} if self.lambda_api else {}),
            "POWERTOOLS_METRICS_DISABLED": os.environ.get("POWERTOOLS_METRICS_DISABLED", "false"),
        }

    def failed_batches_stored(self) -> int:
        """The failed batches the mappings stored in the failure bucket (not redriven yet)."""
        if not self.failed_batches_bucket:
            return 0
        s3 = aws.client("s3", self.services_endpoint, self.region)
        return s3.list_objects_v2(Bucket=self.failed_batches_bucket, Prefix="aws/lambda/").get("KeyCount", 0)

    def failure_environment(self) -> dict[str, str]:
        """Where `hybridsync failed-batches` finds the mappings' failed batches."""
        return {"FAILED_BATCHES_BUCKET": self.failed_batches_bucket} if self.failed_batches_bucket else {}

    def operator_environment(self) -> dict[str, str]:
        """What the operators' commands need to reach the app as they reach a deployed stack: its
        Lambda API, and the functions the stack outputs name (operations, aggregate)."""
        env = {"LAMBDA_ENDPOINT": self.lambda_api.endpoint} if self.lambda_api else {}
        for variable, construct in (
            ("OPERATIONS_FUNCTION", "Operations"),
            ("AGGREGATE_FUNCTION", "Aggregate"),
            ("MIGRATE_FUNCTION", "Migrate"),
        ):
            if construct in self.functions:
                env[variable] = construct
        return env

    def role(self, function: Resource) -> tuple[str, list[dict[str, Any]]]:
        """The function's execution role: its name and its policies' statements, in local ARNs (and
        `rds-db:connect` as a login read as its secret: local/postgres/logins.py)."""
        name, statements = iam.role_statements(self.assembly, function)
        return name, self.logins.stand_in(statements)

    def network(self, function: Resource) -> dict[str, Any] | None:
        """What a VPC-attached function reaches, as the deploy rules read the templates (None: not in
        a VPC, so every public endpoint), for local/vpc/network.py."""
        if self._rule_templates is None:
            self._rule_templates = rules.Templates(self.assembly.templates)
        found = rules.network(self._rule_templates, function.stack, function.logical_id)
        if found is None:
            return None
        return {"function": found.function, "region": self.region,
                "reachable": dict(found.reachable), "needed": dict(found.needed)}  # fmt: skip

    def customer_keys(self) -> dict[str, str]:
        """Every resource under a customer-managed key in the templates -> that key: secrets (by local
        ARN and name), queues and buckets (by ARN). An AWS-managed key (`alias/aws/...`) is left out:
        its policy lets its service's users use it, so the caller needs nothing of its own. A DynamoDB
        table's items need nothing of the caller (DynamoDB's grant), its stream's records kms:Decrypt
        (local/iam/policies.py KMS_ACTIONS): tables by their stream's ARN."""
        a, found = self.assembly, {}

        def customer(stack: str, value: Any) -> str | None:
            key = a.resolve(stack, value) if value is not None else None
            return (
                str(key)
                if key and not str(key).startswith("alias/aws/") and ":alias/aws/" not in str(key)
                else None
            )

        for secret in a.resources("AWS::SecretsManager::Secret"):
            arn = a.resolve(secret.stack, {"Ref": secret.logical_id})
            if arn and (key := customer(secret.stack, secret.properties.get("KmsKeyId"))):
                found[arn] = found[f"{self.prefix}-{secret.construct}"] = key
        for queue in a.resources("AWS::SQS::Queue"):
            if key := customer(queue.stack, queue.properties.get("KmsMasterKeyId")):
                found[a.resolve(queue.stack, {"Fn::GetAtt": [queue.logical_id, "Arn"]})] = key
        for bucket in a.resources("AWS::S3::Bucket"):
            rules = bucket.properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
            for rule in rules:
                default = rule.get("ServerSideEncryptionByDefault", {})
                if default.get("SSEAlgorithm") in ("aws:kms", "aws:kms:dsse") and (
                    key := customer(bucket.stack, default.get("KMSMasterKeyID"))
                ):
                    found[f"arn:aws:s3:::{self.buckets[bucket.construct]}"] = key
        for table in (t for kind in TABLE_TYPES for t in a.resources(kind)):  # their streams' records
            sse = (table.properties.get("Replicas") or [{}])[0].get(
                "SSESpecification"
            ) or table.properties.get("SSESpecification", {})
            stream = a.resolve(table.stack, {"Fn::GetAtt": [table.logical_id, "StreamArn"]})
            if stream and (key := customer(table.stack, sse.get("KMSMasterKeyId"))):
                found[str(stream)] = key
        return found

    def keys_for(self, function: Resource) -> dict[str, str]:
        """The customer keys a function's calls are checked for. A login's secret the function reads
        only because the local app stands it in for RDS Proxy's IAM login (local/postgres/logins.py) is left
        out: in AWS the function never reads it, so it needs no kms:Decrypt on its key."""
        keys = dict(self._customer_keys if self._customer_keys is not None else self.customer_keys())
        self._customer_keys = keys
        raw = iam.role_statements(self.assembly, function)[1]
        for arn in self.logins.by_user.values():
            if arn in keys and not iam.allowed(raw, "secretsmanager:GetSecretValue", arn, {}):
                keys = {k: v for k, v in keys.items() if k != arn}
        return keys

    def may(self, function: Resource, action: str, resource: str) -> bool:
        """Whether the function's role allows `action` on `resource` (always, with IAM off)."""
        return not self.iam or iam.allowed(self.role(function)[1], action, resource, {})

    def build_functions(self) -> dict[str, LocalFunction]:
        logs = self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for function in self.python_functions():
            reserved = function.properties.get("ReservedConcurrentExecutions")
            log_file = (logs / f"{function.construct}.log").open("a")
            self._logs.append(log_file)
            self.functions[function.construct] = LocalFunction(
                name=function.construct,
                asset=self.assembly.directory / function.metadata["aws:asset:path"],
                handler=function.properties["Handler"],
                environment=self.function_environment(function),
                timeout_s=float(function.properties.get("Timeout", 3)),
                memory_mb=int(function.properties.get("MemorySize", 128)),
                log=log_file,
                reserved=reserved if reserved is None else int(reserved),
                metric=self._lambda_metric(function.construct),
            )
        return self.functions

    def _lambda_metric(self, function: str) -> Any:
        """What Lambda counts of a function, into the local metrics (dimension FunctionName)."""
        return lambda name, value: self.metrics.put("AWS/Lambda", name, {"FunctionName": function}, value)

    def function(self, name: str) -> LocalFunction:
        """By construct id, any case, with or without underscores (`write_back` = `WriteBack`)."""
        wanted = name.replace("_", "").replace("-", "").lower()
        for function_name, function in self.functions.items():
            if function_name.lower() == wanted:
                return function
        raise TemplateError(f"no function {name!r}; the app has {', '.join(sorted(self.functions))}")

    # --- starting -----------------------------------------------------------------------------

    def start(self, *, http_port: int | None = 0, schedules: bool | Collection[str] = True,
              mappings: bool = True) -> None:  # fmt: skip
        """Provision and run the app. `schedules`: every EventBridge schedule, none, or only those
        that invoke these functions (construct ids: `{"SqlSync"}` runs the outbox drain alone)."""
        self._create_tables()
        self._create_kinesis()
        self._create_queues()
        self._create_buckets()
        self.lambda_api = LambdaApi(self)  # before the functions: the operations function calls it
        self.build_functions()
        if mappings:
            self._create_mappings()  # refused before anything runs, as a deploy would fail
        self.custom_resources = self._run_custom_resources()
        self._start_alarms()
        for poller in self.pollers:  # every poller registered first: each shard's reader starts early enough
            self._spawn(poller.run, self._stop, name=f"poller-{poller.settings.name}")
        # the app's Streams API (its shards, or DynamoDB Local's with the platform's marks), for
        # redrives and any other reader
        self.streams_server = StreamsServer(self.topologies, self.dynamodb_endpoint, self.expiries)
        for sweeper in self.sweepers:
            self._spawn(sweeper.run, self._stop, name=f"ttl-{sweeper.table}")
        for pump in self.pumps.values():
            self._spawn(pump.run, self._stop, name=f"kinesis-{pump.table}")
        for stream_arn, topology in self.topologies.items():
            self._spawn(self._supervise, stream_arn, topology, name=f"shards-{stream_arn[-12:]}")
        if http_port is not None:
            self._start_http(http_port)
        if schedules:
            self._start_schedules(None if schedules is True else set(schedules))

    def _run_custom_resources(self, only: set[str] | None = None) -> list[str]:
        """What a deploy runs once (the database's logins, the schema migration, today's time-series
        tables): each custom resource's Create event (or those of `only`), through CDK's provider
        framework to the app's function it serves. A failure stops the start, as it fails a deploy."""
        ran = []
        for resource in self.assembly.resources("AWS::CloudFormation::CustomResource"):
            if only is not None and resource.construct not in only:
                continue
            framework_id = resource.properties["ServiceToken"]["Fn::GetAtt"][0]
            framework = self.assembly.templates[resource.stack]["Resources"][framework_id]["Properties"]
            served = framework.get("Environment", {}).get("Variables", {}).get("USER_ON_EVENT_FUNCTION_ARN")
            if served is None:
                continue  # a provider of CDK's own, not one of the app's functions
            function = self.functions[self.assembly.function_of(resource.stack, served).construct]
            properties = self.assembly.resolve(resource.stack, resource.properties)
            stack_id = f"arn:aws:cloudformation:{self.region}:{ACCOUNT}:stack/{resource.stack}"
            function.invoke(
                {
                    "RequestType": "Create",
                    "RequestId": str(uuid.uuid4()),
                    "StackId": stack_id,
                    "LogicalResourceId": resource.logical_id,
                    "ResourceType": resource.type,
                    "ResourceProperties": properties,
                }
            )
            ran.append(resource.construct)
        return ran

    def _create_tables(self) -> None:
        existing = set(self.client.get_paginator("list_tables").paginate().build_full_result()["TableNames"])
        for table in (t for kind in TABLE_TYPES for t in self.assembly.resources(kind)):
            name = self.tables[table.construct]
            properties = table.properties
            destination = (properties.get("Replicas") or [{}])[0].get("KinesisStreamSpecification") or (
                properties.get("KinesisStreamSpecification")
            )
            if destination:  # the Kinesis destination's pump reads the table's own stream (kinesis/models.py)
                self._destinations[table.construct] = destination
                properties = {"StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"}} | properties
            if name not in existing:
                ttl = table.properties.get("TimeToLiveSpecification") or {}
                create_table(
                    self.client,
                    _create_request(name, properties),
                    ttl.get("AttributeName") if ttl.get("Enabled") else None,
                )
            description = self.client.describe_table(TableName=name)["Table"]
            if destination and "LatestStreamArn" not in description:
                self.client.update_table(TableName=name, StreamSpecification={
                    "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})  # fmt: skip
                description = self.client.describe_table(TableName=name)["Table"]
            ttl = table.properties.get("TimeToLiveSpecification") or {}
            if ttl.get("Enabled"):
                keys = [k["AttributeName"] for k in description["KeySchema"]]
                self.sweepers.append(TtlSweeper(self.client, name, ttl["AttributeName"], keys, self.expiries))
            if "LatestStreamArn" in description:
                self.assembly.set(table, StreamArn=description["LatestStreamArn"])
                partition = next(k for k in description["KeySchema"] if k["KeyType"] == "HASH")
                self._partition_keys[description["LatestStreamArn"]] = partition["AttributeName"]

    def _create_kinesis(self) -> None:
        """The templates' Kinesis streams and enhanced fan-out consumers on moto server, and each
        table's streaming destination (its pump). An on-demand stream gets 4 shards, as AWS starts
        one (Kinesis: "on-demand mode" starts at 4 MB/s write capacity, 4 shards); a stream allows
        20 consumers (Kinesis quotas)."""
        a, client = self.assembly, self._kinesis
        existing = set(client.list_streams().get("StreamNames", []))
        for stream in a.resources("AWS::Kinesis::Stream"):
            name = a.resolve(stream.stack, {"Ref": stream.logical_id})
            if name not in existing:
                mode = (stream.properties.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")
                count = (
                    kds.ON_DEMAND_SHARDS
                    if mode == "ON_DEMAND"
                    else int(stream.properties.get("ShardCount", 1))
                )
                client.create_stream(StreamName=name, ShardCount=count)
                self._fresh_streams.add(a.resolve(stream.stack, {"Fn::GetAtt": [stream.logical_id, "Arn"]}))
        consumers: dict[str, list[str]] = {}
        for consumer in a.resources("AWS::Kinesis::StreamConsumer"):
            arn = a.resolve(consumer.stack, {"Fn::GetAtt": [consumer.logical_id, "ConsumerARN"]})
            consumers.setdefault(kds.stream_of(arn), []).append(arn)
            if len(consumers[kds.stream_of(arn)]) > kds.CONSUMERS_PER_STREAM:
                raise TemplateError(f"{consumer.path}: LimitExceededException: a stream has at most "
                                    f"{kds.CONSUMERS_PER_STREAM} enhanced fan-out consumers")  # fmt: skip
            try:
                client.describe_stream_consumer(ConsumerARN=arn)
            except client.exceptions.ResourceNotFoundException:
                client.register_stream_consumer(
                    StreamARN=kds.stream_of(arn), ConsumerName=arn.rpartition("/")[2]
                )
        streams = aws.client("dynamodbstreams", self.dynamodb_endpoint, self.region)
        for table in (t for kind in TABLE_TYPES for t in a.resources(kind)):
            if (spec := self._destinations.get(table.construct)) is None:
                continue
            target = a.resolve(table.stack, spec["StreamArn"])
            name = self.tables[table.construct]
            source = a.resolve(table.stack, {"Fn::GetAtt": [table.logical_id, "StreamArn"]})
            self.pumps[target] = kds.Pump(
                streams, client, stream_arn=source,
                table=name, kinesis_arn=target, checkpoints=self.checkpoints, mark=self.expiries.mark,
                precision=spec.get("ApproximateCreationDateTimePrecision", "MILLISECOND"),
                start="TRIM_HORIZON" if target in self._fresh_streams else "LATEST",
                faults=self.faults.pump_faults(name) if self.faults else None,
            )  # fmt: skip

    def _create_buckets(self) -> None:
        s3 = aws.client("s3", self.services_endpoint, self.region)
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        for name in set(self.buckets.values()) - existing:
            s3.create_bucket(Bucket=name)

    def _create_queues(self) -> None:
        sqs = aws.client("sqs", self.services_endpoint, self.region)
        arns = {}
        for queue in self.assembly.resources("AWS::SQS::Queue"):
            name = self.assembly.resolve(queue.stack, {"Fn::GetAtt": [queue.logical_id, "QueueName"]})
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            self.assembly.set(queue, Ref=url)
            self.queues[name] = url
            arns[self.assembly.resolve(queue.stack, {"Fn::GetAtt": [queue.logical_id, "Arn"]})] = url
        self._sqs = sqs
        self.dead_letter_queues: dict[str, str] = {}  # function -> where its failed async events go
        self._dead_letter_arns: dict[str, str] = {}  # function -> that queue's ARN
        for function in self.python_functions():
            config = self.assembly.resolve(function.stack, function.properties.get("DeadLetterConfig", {}))
            if config.get("TargetArn"):
                self.dead_letter_queues[function.construct] = arns[config["TargetArn"]]
                self._dead_letter_arns[function.construct] = config["TargetArn"]

    # --- alarms (local/cloudwatch/alarms.py) ---------------------------------------------------------------

    def _start_alarms(self) -> None:
        """Every synthesized alarm, evaluated each second on what the app emits."""
        found = []
        for resource in self.assembly.resources("AWS::CloudWatch::Alarm"):
            properties = self.assembly.resolve(resource.stack, resource.properties)
            found.append(Alarm.from_properties(f"{self.prefix}-{resource.construct}", properties))
        own = frozenset(str(f.environment.get("POWERTOOLS_METRICS_NAMESPACE", "hybridsync"))
                        for f in self.functions.values())  # fmt: skip
        self.alarms = Alarms(found, self.metrics, self.state_dir / "notifications", region=self.region,
                             account=ACCOUNT, period_s=self.alarm_period_s, topics=self.topics(),
                             namespaces=own)  # fmt: skip
        for function in self.functions:  # what earlier runs logged is not this run's metrics
            self.metrics.skip(self.state_dir / "logs" / f"{function}.log")
        self.alarms.evaluate()  # every alarm has a state before the app serves
        self._spawn(self._watch, name="alarms")

    def topics(self) -> dict[str, Topic]:
        """Each topic of the templates with what decides whether CloudWatch may publish to it: its
        AWS::SNS::TopicPolicy (none: SNS's default policy), its key, and that key's policy when the
        templates make the key (an imported key's policy is not theirs to show)."""
        a = self.assembly

        def statements(stack: str, document: Any) -> list[dict[str, Any]]:
            listed = (a.resolve(stack, document) or {}).get("Statement", [])
            return self.localized(listed if isinstance(listed, list) else [listed])

        policies: dict[str, list[dict[str, Any]]] = {}
        for policy in a.resources("AWS::SNS::TopicPolicy"):
            for arn in a.resolve(policy.stack, policy.properties.get("Topics", [])):
                policies.setdefault(arn, []).extend(
                    statements(policy.stack, policy.properties["PolicyDocument"])
                )
        keys: dict[str, list[dict[str, Any]]] = {}
        for key in a.resources("AWS::KMS::Key"):
            for name in (a.resolve(key.stack, {"Ref": key.logical_id}),
                         a.resolve(key.stack, {"Fn::GetAtt": [key.logical_id, "Arn"]})):  # fmt: skip
                keys[name] = statements(key.stack, key.properties.get("KeyPolicy", {}))
        for alias in a.resources("AWS::KMS::Alias"):
            if (target := a.resolve(alias.stack, alias.properties.get("TargetKeyId"))) in keys:
                keys[alias.properties["AliasName"]] = keys[target]
        found = {}
        for topic in a.resources("AWS::SNS::Topic"):
            arn = a.resolve(topic.stack, {"Ref": topic.logical_id})
            key = str(a.resolve(topic.stack, topic.properties.get("KmsMasterKeyId")) or "") or None
            found[arn] = Topic(arn, policies.get(arn), key, keys.get(key) if key else None)
            if key and key not in keys:
                why = "a key the templates do not make: CloudWatch's publish to it is refused locally"
                log.warning(
                    "%s is under %s, %s, as its policy cannot be shown to allow it", topic.path, key, why
                )
        return found

    def localized(self, value: Any) -> Any:
        """A pinned stack's literal account and region (`-c kms_key_arn=` pins them to the key's) as the
        local app's: a policy saying `arn:aws:cloudwatch:eu-west-1:111122223333:alarm:*` means this
        app's alarms here, as it means the deployed stack's alarms there."""
        manifest = self.assembly.directory / "manifest.json"
        pinned = set()
        if manifest.is_file():
            for artifact in json.loads(manifest.read_text()).get("artifacts", {}).values():
                account, _, region = (
                    str(artifact.get("environment", "")).removeprefix("aws://").partition("/")
                )
                if account.isdigit() and region and region != "unknown-region":
                    pinned.add((account, region))
        text = json.dumps(value)
        for account, region in pinned:
            text = text.replace(f":{region}:{account}:", f":{self.region}:{ACCOUNT}:")
            text = text.replace(f'"{account}"', f'"{ACCOUNT}"')
        return json.loads(text)

    def _watch(self) -> None:
        logs = self.state_dir / "logs"
        while not self._stop.wait(1.0):
            try:
                for function in self.functions:
                    self.metrics.tail(logs / f"{function}.log")
                for name, depth in self._sample_stores()[0].items():
                    self.metrics.put(
                        "AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": name}, depth
                    )
                assert self.alarms is not None
                for alarm in self.alarms.evaluate():
                    level = logging.WARNING if alarm.state == "ALARM" else logging.INFO
                    log.log(level, "alarm %s: %s (%s)", alarm.name, alarm.state, alarm.reason)
            except Exception:
                log.exception("evaluating the alarms")

    def _mapping_metric(self, function: str, mapping_id: str) -> Any:
        """What Lambda counts of a mapping: per function (IteratorAge, DestinationDeliveryFailures)
        or per mapping (its event counts, MetricsConfig EventCount)."""
        per_function = {"IteratorAge", "DestinationDeliveryFailures"}

        def put(name: str, value: float) -> None:
            dimensions = (
                {"FunctionName": function} if name in per_function else {"EventSourceMappingUUID": mapping_id}
            )
            self.metrics.put("AWS/Lambda", name, dimensions, value)

        return put

    def _destination(self, arn: str | None, mapping_id: str) -> Any:
        if not arn:
            return None
        if ":s3:" in arn:
            self.failed_batches_bucket = arn.split(":")[-1]
        try:
            return mappings.destination(
                arn, lambda service: aws.client(service, self.services_endpoint, self.region), mapping_id
            )
        except (ValueError, self._sqs.exceptions.QueueDoesNotExist) as error:
            raise TemplateError(f"failure destination {arn}: {error}") from None

    def _create_mappings(self) -> None:
        """Every stream mapping, checked as CreateEventSourceMapping checks it (a refusal fails the
        start as it would fail a deploy; recorded: api_errors): a filter Lambda refuses, a second
        mapping of one function on one stream, a stream that does not exist."""
        streams = aws.client("dynamodbstreams", self.dynamodb_endpoint, self.region)
        checkpoints = self.checkpoints
        readers: dict[tuple[str, str], ShardReader] = {}
        mapped: dict[tuple[str, str], str] = {}  # (stream, function) -> the mapping
        for mapping in self.assembly.resources("AWS::Lambda::EventSourceMapping"):
            function = self.assembly.function_of(mapping.stack, mapping.properties["FunctionName"])
            stream_arn = self.assembly.resolve(mapping.stack, mapping.properties["EventSourceArn"])
            kinesis = ":kinesis:" in str(stream_arn)
            if not stream_arn or (":table/" not in stream_arn and not kinesis):
                log.warning("%s: only DynamoDB stream and Kinesis mappings run locally", mapping.path)
                continue
            name = f"{function.construct}:{mapping.logical_id[-8:]}"
            assert self.lambda_api is not None
            mapping_id = self.lambda_api.uuid_of(name)
            self.assembly.set(mapping, Ref=mapping_id)  # the alarms' EventSourceMappingUUID
            try:
                settings = Settings.from_properties(name, mapping.properties)
            except filters.InvalidPattern as refused:
                raise TemplateError(f"{mapping.path}: InvalidParameterValueException: {refused}") from None
            if (stream_arn, function.construct) in mapped:
                raise TemplateError(
                    f'{mapping.path}: ResourceConflictException: The event source arn (" {stream_arn} ") and '
                    f'function (" {function.construct} ") provided mapping already exists '
                    f"({mapped[(stream_arn, function.construct)]})"
                )
            mapped[(stream_arn, function.construct)] = mapping.path
            try:
                if kinesis:
                    listed = self._kinesis.list_shards(StreamName=kds.stream_name(stream_arn))["Shards"]
                    if "/consumer/" in stream_arn:
                        self._kinesis.describe_stream_consumer(ConsumerARN=stream_arn)
                    shards = [{"ShardId": shard["ShardId"]} for shard in listed]
                else:
                    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
            except (
                streams.exceptions.ResourceNotFoundException,
                self._kinesis.exceptions.ResourceNotFoundException,
            ):
                raise TemplateError(
                    f"{mapping.path}: InvalidParameterValueException: Stream not found: {stream_arn}"
                ) from None
            destination = self.assembly.resolve(
                mapping.stack, mapping.properties.get("DestinationConfig", {}).get("OnFailure", {})
            ).get("Destination")
            # the mapping reads the stream and sends failure records with the function's role
            needed = [(f"dynamodb:{action}", stream_arn) for action in STREAM_READ]
            listed = "GetRecords, GetShardIterator, DescribeStream, and ListStreams"
            if kinesis:  # Lambda: services-kinesis-create.html; SubscribeToShard on a fan-out consumer
                needed = [(f"kinesis:{action}", kds.stream_of(stream_arn)) for action in kds.KINESIS_READ]
                needed += [(f"kinesis:{a}", stream_arn) for a in kds.EFO_READ if "/consumer/" in stream_arn]
                listed = ", ".join(action.partition(":")[2] for action, _ in needed[:-1]) + (
                    f", and {needed[-1][0].partition(':')[2]}")  # fmt: skip
            for action, resource in needed:
                if not self.may(function, action, resource):
                    raise TemplateError(
                        f"{mapping.path}: InvalidParameterValueException: Cannot access stream "
                        f"{stream_arn}. Please ensure the role can perform the {listed} "
                        "Actions on your stream in IAM."
                    )
            send = {"sqs": "sqs:SendMessage", "sns": "sns:Publish", "s3": "s3:PutObject"}
            if destination and not self.may(
                function,
                send[destination.split(":")[2]],
                # an S3 destination: the objects Lambda writes, `aws/lambda/<mapping>/...`
                destination + (f"/aws/lambda/{mapping_id}/" if ":s3:" in destination else ""),
            ):
                raise TemplateError(
                    f"{mapping.path}: InvalidParameterValueException: The function execution role "
                    f"does not have permissions to call {send[destination.split(':')[2]]} on {destination}"
                )
            stats = self.mapping_stats.setdefault(name, MappingStats())
            self.mapping_functions[name], self.mapping_settings[name] = function.construct, settings
            self.mapping_sources[name] = stream_arn
            invoke = self.functions[function.construct].invoke
            if self.faults:
                invoke = self.faults.wrap(function.construct, invoke)
            plan = {
                "settings": settings,
                "invoke": invoke,
                "stream_arn": stream_arn,
                "checkpoints": checkpoints,
                "on_failure": self._destination(destination, mapping_id),
                "function_arn": self.assembly.resolve(
                    function.stack, {"Fn::GetAtt": [function.logical_id, "Arn"]}
                ),
                "stats": stats,
                # Enabled: false (pipeline_enabled=false) creates it disabled, its position kept
                "switch": self.switches.setdefault(
                    name, Switch(enabled=mapping.properties.get("Enabled", True) is not False)
                ),
                "metric": self._mapping_metric(function.construct, mapping_id),
            }
            if kinesis:
                self._plan_kinesis(plan, stream_arn, [s["ShardId"] for s in shards], function)
                continue
            if self.sharded:
                self._plan_sharded(mapping.path, plan, streams)
                continue
            for shard in shards:
                reader = readers.get((stream_arn, shard["ShardId"])) or readers.setdefault(
                    (stream_arn, shard["ShardId"]),
                    ShardReader(streams, stream_arn, shard["ShardId"], self.expiries.mark),
                )  # one reader per shard, shared by its mappings
                self.pollers.append(ShardPoller(streams=reader, shard=shard["ShardId"], **plan))

    def _plan_kinesis(self, plan: dict[str, Any], source: str, shards: list[str], function: Resource) -> None:
        """A mapping on a Kinesis stream or fan-out consumer: a poller per shard, each reading its
        own copy (local/kinesis/models.py). A stream this run made anew holds none of the saved positions."""
        name, stream_arn = plan["settings"].name, kds.stream_of(source)
        self._kinesis_mappings.add(name)
        pump = self.pumps.get(stream_arn)
        role = f"arn:aws:iam::{ACCOUNT}:role/{self.role(function)[0]}"
        for shard in shards:
            if stream_arn in self._fresh_streams:
                plan["checkpoints"].forget(name, stream_arn, shard)
            reader = kds.KinesisShardReader(
                self._kinesis, stream_arn, shard, role=role, efo="/consumer/" in source,
                source_through=(lambda pump=pump: pump.read_through) if pump else time.time,
                latest=(lambda pump=pump, shard=shard: pump.latest.get(shard, 0)) if pump else None,
            )  # fmt: skip
            self.pollers.append(
                ShardPoller(streams=reader, shard=shard, **(plan | {"stream_arn": stream_arn}))
            )

    def _lag(self, name: str, stats: MappingStats) -> int:
        """A mapping's records not delivered yet. A Kinesis mapping's: in its pollers' buffers, in
        its shards unread, and the changes its pump has read and not yet put."""
        if name not in self._kinesis_mappings:
            return self._backlog(name) if self.sharded else stats.lag_records
        pump = self.pumps.get(kds.stream_of(self.mapping_sources[name]))
        latest = pump.latest if pump else {}
        pollers = [p for p in self.pollers if p.settings.name == name]
        return sum(len(p.buffer) + p.reader.backlog(latest) for p in pollers) + (pump.waiting if pump else 0)

    # --- shards as production has them (local/dynamodb/shards.py) ----------------------------------------

    def _plan_sharded(self, path: str, plan: dict[str, Any], streams: Any) -> None:
        """A mapping on a sharded stream: its pollers start shard by shard (`_supervise`). Each
        function gets a container per shard and lane, as Lambda runs one invocation per shard x
        parallelization factor at once."""
        stream_arn = plan["stream_arn"]
        if stream_arn not in self.topologies:
            table = stream_arn.split(":table/")[1].split("/")[0]
            self.topologies[stream_arn] = Topology(
                streams, stream_arn, self._partition_keys[stream_arn], shards=self.shard_count,
                lifetime_s=self.shard_lifetime_s, records_per_shard=self.shard_records,
                retention_s=self.retention_s or 24 * 3600, mark=self.expiries.mark,
                state=self.state_dir / "shards" / f"{table}.json",
            )  # fmt: skip
        plans = self._plans.setdefault(stream_arn, [])
        if len(plans) >= READERS_PER_SHARD:
            raise TemplateError(
                f"{path}: LimitExceededException: {stream_arn} already has {len(plans)} mappings "
                f"({', '.join(p['settings'].name for p in plans)}); DynamoDB Streams throttles a shard "
                "read by more than two (Lambda's DynamoDB Streams guide): a third consumer must read "
                "another stream or the others' output"
            )
        plans.append(plan)
        function = self.functions[self.mapping_functions[plan["settings"].name]]
        function.max_containers = max(function.max_containers,
                                      2 * self.shard_count * plan["settings"].parallelization)  # fmt: skip

    def _supervise(self, stream_arn: str, topology: Topology) -> None:
        """Start each mapping's poller on each shard once the shard's parent is done for that
        mapping (Lambda finishes a parent before its children); forget positions of shards the
        stream deleted."""
        started: dict[tuple[str, str], ShardPoller] = {}
        done: set[tuple[str, str]] = set()
        lock = threading.Lock()

        def run(poller: ShardPoller, key: tuple[str, str]) -> None:
            poller.run(self._stop)
            if getattr(poller, "done", False):
                with lock:
                    done.add(key)

        while not self._stop.is_set():
            try:
                topology.pump()
                for shard in list(topology.shards.values()):
                    for plan in self._plans[stream_arn]:
                        name = plan["settings"].name
                        parent = shard.parent
                        with lock:
                            ready = parent is None or parent not in topology.shards or (name, parent) in done
                        if (name, shard.id) in started or not ready:
                            continue
                        poller = ShardPoller(streams=ShardView(topology, shard), shard=shard.id,
                                             retention_s=topology.retention_s, **plan)  # fmt: skip
                        started[(name, shard.id)] = poller
                        self.pollers.append(poller)
                        self._spawn(run, poller, (name, shard.id), name=f"poller-{name}-{shard.id[-8:]}")
                for key in [k for k in started if k[1] in topology.dropped]:
                    plan_of = next(p for p in self._plans[stream_arn] if p["settings"].name == key[0])
                    plan_of["checkpoints"].forget(key[0], stream_arn, key[1])
                    self.pollers.remove(started.pop(key))
                    done.discard(key)
            except Exception:
                log.exception("shards of %s", stream_arn)
            self._stop.wait(POLL_INTERVAL_S)

    def split(self, table: str | None = None, shard: str | None = None) -> tuple[str, str]:
        """Split a shard of a table's stream (the model's name or the physical one; default the
        only sharded stream) into two children, as a partition split does; the children's ids."""
        if not self.topologies:
            raise ValueError("no sharded stream: start the app with shards > 1 or a shard lifetime")
        physical = self.table_names.get(table or "", table)
        found = [t for arn, t in self.topologies.items() if physical is None or f":table/{physical}/" in arn]
        if len(found) != 1:
            raise ValueError(f"name one of the sharded tables: {sorted(self.topologies)}")
        return found[0].split(shard)

    def _backlog(self, name: str) -> int:
        """Records of a mapping not delivered yet on a sharded stream: in its pollers' buffers and
        in every shard it has not read to the end (children not started included)."""
        waiting = 0
        for stream_arn, topology in self.topologies.items():
            if not any(p["settings"].name == name for p in self._plans.get(stream_arn, [])):
                continue
            pollers = {p.shard: p for p in self.pollers if p.settings.name == name}
            for shard_id in list(topology.shards):
                poller = pollers.get(shard_id)
                if poller is not None and poller.done:
                    continue
                waiting += topology.backlog(shard_id, id(poller) if poller else None)
                waiting += len(poller.buffer) if poller else 0
        return waiting

    def _read_through(self, name: str) -> float:
        """The wall time before which every record written to a mapping's stream has been read,
        so its lag counts them (0 before the first read): a lag of 0 alone may predate a write."""
        if self.sharded and name not in self._kinesis_mappings:
            times = [t.read_through for arn, t in self.topologies.items()
                     if any(p["settings"].name == name for p in self._plans.get(arn, []))]  # fmt: skip
        else:
            times = [p.read_through for p in self.pollers if p.settings.name == name]
        return min(times, default=0.0)

    def _spawn(self, target: Any, *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    # --- HTTP API -----------------------------------------------------------------------------

    def routes(self) -> list[apigateway.Route]:
        """Every route of every HTTP API, with the function its integration invokes."""
        integrations = {
            (i.stack, i.logical_id): i for i in self.assembly.resources("AWS::ApiGatewayV2::Integration")
        }
        found = []
        for route in self.assembly.resources("AWS::ApiGatewayV2::Route"):
            target = self.assembly.resolve(route.stack, route.properties["Target"])  # integrations/<id>
            integration = integrations[(route.stack, target.split("/")[-1])]
            function = self.assembly.function_of(integration.stack, integration.properties["IntegrationUri"])
            invoke = self.functions[function.construct].invoke
            found.append(apigateway.Route(route.properties["RouteKey"], invoke))
        return found

    def _start_http(self, port: int) -> None:
        apis = [a.logical_id for a in self.assembly.resources("AWS::ApiGatewayV2::Api")]
        access = (self.state_dir / "logs" / "api-access.log").open("a", buffering=1)
        self._logs.append(access)
        lock = threading.Lock()

        def access_log(entry: dict[str, Any]) -> None:
            """The stage's JSON access log line, and what API Gateway counts of it."""
            with lock:
                access.write(json.dumps(entry) + "\n")
            for api in apis[:1]:
                status, dimensions = entry["status"], {"ApiId": api}
                self.metrics.put("AWS/ApiGateway", "Count", dimensions, 1)
                self.metrics.put("AWS/ApiGateway", "4xx", dimensions, int(400 <= status < 500))
                self.metrics.put("AWS/ApiGateway", "5xx", dimensions, int(status >= 500))
                self.metrics.put("AWS/ApiGateway", "Latency", dimensions, entry["responseLatency"])

        self.http = apigateway.serve(self.routes(), port, FunctionError, access_log)
        self._spawn(self.http.serve_forever, name="http")

    # --- schedules ----------------------------------------------------------------------------

    def _start_schedules(self, only: set[str] | None = None) -> None:
        for rule in self.assembly.resources("AWS::Events::Rule"):
            expression = rule.properties.get("ScheduleExpression", "")
            matched = RATE.fullmatch(expression)  # a disabled rule (pipeline_enabled=false) never runs
            if not matched or rule.properties.get("State", "ENABLED") != "ENABLED":
                if expression:
                    log.warning("%s: schedule %r does not run locally", rule.path, expression)
                continue
            unit = {"minute": 60, "hour": 3600, "day": 86400}[matched[2].rstrip("s")]
            targets = [self.assembly.function_of(rule.stack, t["Arn"]) for t in rule.properties["Targets"]]
            functions = [self.functions[t.construct] for t in targets]
            if only is not None and not only & {f.name for f in functions}:
                continue
            every = int(matched[1]) * unit
            self._spawn(self._every, every, functions, rule, name=f"schedule-{rule.construct}")

    def _every(self, seconds: int, functions: list[LocalFunction], rule: Resource) -> None:
        """A rate schedule: its first run at once (EventBridge runs a new rule's first within its
        period), then one every period, whatever a run lasts: each invocation is asynchronous,
        its own thread ("All schedule types on EventBridge Scheduler invoke their targets with 60
        second precision": the local clock is exact, which no test may rely on)."""
        ticks = itertools.count()
        started = time.monotonic()
        while not self._stop.wait(max(0.0, started + next(ticks) * seconds - time.monotonic())):
            arn = f"arn:aws:events:{self.region}:{ACCOUNT}:rule/{rule.construct}"
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": "Scheduled Event",
                "source": "aws.events",
                "account": ACCOUNT,
                "region": self.region,
                "detail": {},
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "resources": [arn],
            }
            for function in functions:  # EventBridge invokes asynchronously
                threading.Thread(target=self.invoke_async, args=(function, event), daemon=True,
                                 name=f"{rule.construct}-run").start()  # fmt: skip

    def invoke_async(self, function: LocalFunction, event: Any) -> None:
        """An asynchronous invocation as Lambda runs it: retried twice when it fails, then its event
        goes to the function's dead-letter queue; with reserved concurrency 0 it goes there at once,
        untried (Lambda developer guide, "Capturing records of asynchronous invocations")."""
        error, failures = None, 0
        while failures <= ASYNC_RETRIES:
            if function.reserved == 0:
                error = function.throttled()
                break
            try:
                function.invoke(event)
                return
            except FunctionError as failed:
                if self._stop.is_set():
                    return  # the app stopped under a running invocation: nothing to retry
                error = failed
                if failed.error_type != "TooManyRequestsException":
                    failures += 1
                elif self._stop.wait(1.0):  # throttled: Lambda keeps the event and tries again
                    return
        log.warning("%s: asynchronous invocation failed: %s", function.name, error)
        queue = self.dead_letter_queues.get(function.name)
        if queue is None or error is None:
            return
        if refused := self.dead_letter_refusal(function.name):  # Lambda counts it and the event is lost
            log.error("%s: dead-letter queue: %s", function.name, refused)
            function.metric("DeadLetterErrors", 1)
            return
        try:
            self._sqs.send_message(
                QueueUrl=queue,
                MessageBody=json.dumps(event),
                MessageAttributes={
                    "RequestID": {"DataType": "String", "StringValue": str(uuid.uuid4())},
                    "ErrorCode": {
                        "DataType": "String",
                        "StringValue": "200" if function.reserved != 0 else "429",
                    },
                    "ErrorMessage": {"DataType": "String", "StringValue": str(error)[:1000]},
                },
            )
        except Exception:  # Lambda counts it and the event is lost
            log.exception("%s: dead-letter queue", function.name)
            function.metric("DeadLetterErrors", 1)

    def dead_letter_refusal(self, name: str) -> str | None:
        """Why Lambda cannot send a function's failed event to its dead-letter queue, or None. Lambda
        sends it with the function's execution role ("the function's execution role needs
        sqs:SendMessage", Lambda developer guide, invocation-async-retain-records.html#invocation-dlq),
        and to a queue under a customer key that producer needs kms:GenerateDataKey and kms:Decrypt
        too (SQS key management, sqs-key-management.html#send-to-encrypted-queue)."""
        arn = self._dead_letter_arns.get(name)
        function = next((f for f in self.python_functions() if f.construct == name), None)
        if not self.iam or arn is None or function is None:
            return None
        statements = self.role(function)[1]
        key = self.keys_for(function).get(arn)
        needed = [("sqs:SendMessage", arn)] + (
            [("kms:GenerateDataKey", key), ("kms:Decrypt", key)] if key else []
        )
        for action, resource in needed:
            if not iam.allowed(statements, action, resource, {}):
                return f"the execution role may not {action} on {resource}"
        return None

    # --- status and stopping ------------------------------------------------------------------

    def _sample_stores(self) -> tuple[dict[str, int], int]:
        """Each queue's depth (CloudWatch's ApproximateNumberOfMessagesVisible is the API's
        ApproximateNumberOfMessages) and the failed batches stored: read once a second by the alarms'
        clock, and what `status()` shows."""
        visible = "ApproximateNumberOfMessages"
        depths = {
            name: int(
                self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[visible])["Attributes"][visible]
            )
            for name, url in self.queues.items()
        }
        self._stores = (depths, self.failed_batches_stored())
        return self._stores

    def freshness_values(self, since: float) -> dict[str, list[float]]:
        """Each direction's `Freshness` values (ms) since `since`, oldest first, as the alarms read them:
        from the EMF lines of its function's log, in the function's namespace and `service`. Only the
        directions whose function the app has."""
        functions = {direction: self.functions.get(construct) for direction, construct in FRESHNESS.items()}
        return {d: self.emitted(f, "Freshness", since) for d, f in functions.items() if f is not None}

    def emitted(self, function: LocalFunction, name: str, since: float = 0) -> list[float]:
        """A metric's values a function emitted (Powertools EMF: its namespace and `service`), oldest
        first, from `since` (the stacks set both variables on every engine function)."""
        namespace = str(function.environment.get("POWERTOOLS_METRICS_NAMESPACE", "hybridsync"))
        service = str(function.environment.get("POWERTOOLS_SERVICE_NAME", namespace))
        return self.metrics.values(namespace, name, {"service": service}, since)

    def freshness(self, window_s: float = FRESHNESS_WINDOW_S) -> dict[str, dict[str, Any]]:
        """Per direction, p50 and p99 (s) and the count of the freshness values of the last `window_s`."""
        since = time.time() - window_s
        return {d: percentiles_s(values) for d, values in self.freshness_values(since).items()}

    def status(self) -> dict[str, Any]:
        queues, stored = self._stores or self._sample_stores()
        return {
            "at": time.time(),
            "http": f"http://127.0.0.1:{self.http.server_address[1]}" if self.http else None,
            "mappings": {
                name: {
                    "function": self.mapping_functions[name],
                    "position": s.position,
                    "delivered": s.delivered,
                    "filtered": s.filtered,
                    "batches": s.batches,
                    "retries": s.retries,
                    "lag_records": self._lag(name, s),
                    "read_through": self._read_through(name),
                    "lag_s": round(s.lag_s, 3),
                    "sent_to_failure_queue": s.sent_to_failure_queue,
                    "last_error": s.last_error,
                    "blocked": s.blocked,
                    "trimmed": s.trimmed,
                    "state": self.switches[name].state if name in self.switches else "Enabled",
                }
                for name, s in self.mapping_stats.items()
            },
            "functions": {name: vars(f.stats) for name, f in self.functions.items()},
            "alarms": self.alarms.status() if self.alarms else {},
            "freshness": self.freshness(),
            "failure_queues": queues,
            "failed_batches": stored,
            "outbox": self._outbox(),
            "faults_injected": dict(self.faults.counts) if self.faults else {},
            # items whose keys fit no entity of the model, in the last hour: a writer outside it
            "unplaced": int(self.metrics.total("WriteBackUnplaced")),
            "streams": {
                arn.split(":table/")[1].split("/")[0]: topology.figures()
                for arn, topology in self.topologies.items()
            },
            "kinesis_destinations": {
                pump.table: {"stream": arn, "put": pump.put, "waiting": pump.waiting}
                for arn, pump in self.pumps.items()
            },
        }

    def _outbox(self) -> dict[str, Any] | None:
        """The drain's figures as its metrics tell them (the outbox as the last run left it; rows
        since the app started), and its function's failures."""
        function = self.functions.get("SqlSync")
        if function is None:
            return None

        def values(name: str) -> list[float]:
            return self.emitted(function, name)

        figures = {key: int(sum(values(name))) for key, name in (
            ("applied", "OutboxApplied"), ("superseded", "OutboxSuperseded"),
            ("dead_lettered", "DeadLetters"), ("deferred", "OutboxDeferred"))}  # fmt: skip
        return figures | {
            "depth": int((values("OutboxDepth") or [0])[-1]),
            "oldest_age_s": round((values("OutboxAge") or [0.0])[-1], 3),
            "errors": function.stats.errors,
            "last_error": function.stats.last_error or None,
        }

    def stop(self) -> None:
        """Stop polling (each poller delivers what it has read first), then the rest."""
        self._stop.set()
        if self.http is not None:
            self.http.shutdown()
        for thread in self._threads:
            thread.join(timeout=30)
        if self.streams_server is not None:
            self.streams_server.close()
        if self.lambda_api is not None:
            self.lambda_api.close()
        for function in self.functions.values():
            function.close()
        for log_file in self._logs:
            log_file.close()
