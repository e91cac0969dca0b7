"""Standby stacks: in each replica Region that `hybridsync standby REGION` prepared, the engine's
consumers (write-back, aggregation, the outbox drain, the operations function), deployed and idle,
so a failover has a pipeline to move to when home is gone.

A Lambda mapping reads a stream of its function's own Region only (CloudFormation refuses another:
"Event source region must match Lambda region"), so the new home's consumers must exist there before
home fails. Each standby reads its Region's replica streams with its mappings and its drain schedule
disabled: every change is written back and folded once, at home, until `hybridsync failover --to
REGION --deployed` disables home's and enables these (the deploy truth's `replica-consumer` rule
allows a replica's stream to nothing else).

What crosses Regions comes from the context `hybridsync standby` wrote into cdk.json, never from a
cross-Region reference (CDK's are an experimental custom resource):
- each table's name (home's data stack outputs) and its replica's stream ARN in the Region
  (DescribeTable there: a global table's stream ARNs are per replica);
- each database role's secret: a replica of home's, same ARN but the Region (Secrets Manager,
  "Replicate secrets"); home still rotates it and the Users step runs at home only;
- the network in the Region that reaches the database (your own PostgreSQL: the standby needs a
  writer it can reach, and an Aurora cluster in home's NAT-less VPC is no such writer);
- the bodies bucket's name: it stays in home (exports read from it while home answers)."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, ArnFormat, CfnOutput, Environment, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync import truth
from hybridsync.cdk import database
from hybridsync.cdk.alarm_topic import alarm_topic
from hybridsync.cdk.data import ChangeStreams, title
from hybridsync.cdk.database import DatabaseStack
from hybridsync.cdk.monitoring import MonitoringStack
from hybridsync.cdk.pipeline import PipelineStack
from hybridsync.model.declare import Model, Side, regions
from hybridsync.sql import roles
from hybridsync.truth import context
from hybridsync.truth.facts import STANDBY

COMMAND = "hybridsync standby REGION --vpc vpc-... --subnets subnet-a,subnet-b"


def prepared(app: App | Construct, model: Model) -> dict[str, dict[str, Any]]:
    """The standby entries of the context (`-c standby=<json>` or cdk.json), by Region,
    each checked against the model and the deployment: a ValueError names what is wrong."""
    entries = context.standbys(app)
    replicated = {r for t in model.tables for r in context.replicas(app, t)}
    for region, entry in entries.items():
        (region,) = regions((region,), "-c standby")
        if region not in replicated:
            raise ValueError(f"-c standby: {region} holds no replica of the model's tables "
                             f"(replicas: {', '.join(sorted(replicated)) or 'none'})")  # fmt: skip
        if context.read(app, "existing_db_proxy"):
            raise ValueError(
                f"-c standby: {region} needs a PostgreSQL writer it can reach, and -c existing_db_proxy "
                "lives in home's VPC: drop the proxy (your database admits the standby's subnets), or "
                "let the app's Aurora cluster stand by as an Aurora Global Database"
            )
        here = {t.name for t in model.tables if region in context.replicas(app, t)}
        if far := sorted(consumed(model) - here):
            raise ValueError(f"-c standby: {', '.join(far)} has no replica in {region}, and the standby's "
                             "consumers read it: give it one, or stand by in another Region")  # fmt: skip
        own_network = ("vpc_id", "subnet_ids") if context.read(app, "existing_db_secret_arn") else ()
        missing = [n for n in ("tables", "secrets", *own_network) if not entry.get(n)]
        missing += [f"tables.{n}" for n in sorted(here - set(entry.get("tables") or {}))]
        missing += [f"secrets.{r}" for r in roles.ROLES if r not in (entry.get("secrets") or {})]
        if context.read(app, "alarm_topic_arn") and not (
            entry.get("alarm_topic_arn") or context.read(app, "alarm_email")
        ):
            raise ValueError(f"-c standby: {region}'s alarms would reach no one (-c alarm_topic_arn is "
                             f"home's topic): run `{COMMAND} --alarm-topic-arn arn:aws:sns:{region}:...`, "
                             "or set -c alarm_email")  # fmt: skip
        if missing:
            raise ValueError(f"-c standby: {region} lacks {', '.join(missing)}: run `{COMMAND}` again")
    return entries


def consumed(model: Model) -> set[str]:
    """The tables a standby's consumers read or write: written back, folded, fed from PostgreSQL,
    and the one its operations function keeps its jobs in."""
    return (
        {e.table.name for e in model.written_back()}
        | {a.table.name for a in model.aggregates}
        | {e.table.name for e in model.mastered_in(Side.POSTGRESQL)}
        | {model.jobs["job"].table.name}
    )


class StandbyDatabase:
    """The database as the standby's functions reach it: the Region's network, the roles' replica
    secrets (read-only: the Users step and the rotation stay at home), no proxy."""

    cluster = None
    proxy = None
    key = None  # replicas refuse a customer key (cdk/app.py): replica secrets are under aws/secretsmanager

    def __init__(self, stack: Stack, entry: dict[str, Any]) -> None:
        subnets = entry["subnet_ids"]
        self.vpc = ec2.Vpc.from_vpc_attributes(
            stack, "Vpc", vpc_id=entry["vpc_id"], availability_zones=stack.availability_zones[: len(subnets)]
        )
        self.subnets = ec2.SubnetSelection(
            subnets=[ec2.Subnet.from_subnet_id(stack, f"Subnet{i}", s) for i, s in enumerate(subnets)]
        )
        self.client_security_group = ec2.SecurityGroup(
            stack, "DatabaseClients", vpc=self.vpc, description="standby functions that talk to PostgreSQL"
        )
        NagSuppressions.add_resource_suppressions(self.client_security_group, [{"id": "AwsSolutions-EC23",
            "reason": "No ingress rules; your database admits this Region's subnets."}])  # fmt: skip
        DatabaseStack._routes_given(self.client_security_group)  # the Region's own routes: the team's
        self.endpoint_urls: dict[str, str] = {}
        if streams := entry.get("streams_endpoint"):  # Streams' interface endpoint has no private DNS
            self.endpoint_urls[truth.ENDPOINT_VARIABLE["dynamodbstreams"]] = streams
        self.role_secrets: dict[str, secretsmanager.ISecret] = {
            role: secretsmanager.Secret.from_secret_complete_arn(stack, f"{role.title()}Secret", arn)
            for role, arn in entry["secrets"].items()
        }
        self.database_name = context.read(stack, "existing_db_name")

    def connect(self, function: lambda_.Function, role: str) -> dict[str, str]:
        """A role's login: its replica secret, the only one the function may read."""
        self.grant_secret_read(self.role_secrets[role], function)
        return {"DB_SECRET_ARN": self.role_secrets[role].secret_arn, "DB_ROLE": role}

    def grant_secret_read(self, secret: secretsmanager.ISecret, function: lambda_.IFunction) -> None:
        secret.grant_read(function)


class StandbyAuroraStack(DatabaseStack):
    """With the app's Aurora cluster, the standby's database in its Region
    (`<prefix>-standby-<region>-database`): a VPC as home's (no NAT, the endpoints its functions
    call), a secondary cluster of home's Aurora Global Database, read-only until `hybridsync failover
    --deployed` moves the writer here (SwitchoverGlobalCluster, or FailoverGlobalCluster when home
    is down), and an RDS Proxy in front of it that the standby's functions log in through with IAM,
    as home's do. The proxy reads each role's password from the role secret's replica; the logins
    themselves replicate with the database. "For a proxy that has a secondary cluster as a registered
    target, ... requests sent to the read/write endpoint fail", and after a switchover or failover
    it "sends them to the writer instance of the new primary cluster as soon as it's available"
    (Aurora guide, "Using RDS Proxy with Aurora global databases")."""

    def __init__(self, scope: Construct, id: str, *, entry: dict[str, Any], global_cluster: str,
                 **kwargs: Any) -> None:  # fmt: skip
        self.entry, self.global_cluster = entry, global_cluster
        super().__init__(scope, id, **kwargs)
        self.template_options.metadata = {STANDBY: self.region}

    def _through_proxy(self, user: str) -> dict[str, str]:
        return super()._through_proxy(user) | {"DB_READER_HOST": self.reader.endpoint}

    def provide(self, dev: bool) -> None:
        self._create_network()
        self.admin_user = None  # the Users step and the migrations at deploy stay home's
        self.role_secrets = {
            role: secretsmanager.Secret.from_secret_complete_arn(self, f"{role.title()}Secret", arn)
            for role, arn in self.entry["secrets"].items()
        }
        group = ec2.SecurityGroup(self, "ClusterGroup", vpc=self.vpc, description="the secondary cluster")
        subnets = rds.SubnetGroup(self, "ClusterSubnets", vpc=self.vpc, vpc_subnets=self.subnets,
                                  description="the secondary cluster's subnets")  # fmt: skip
        # named, or RDS refuses an encrypted cross-Region replica ("make sure to set KmsKeyId to a KMS
        # key identifier that is valid in the destination Region", CreateDBCluster): this Region's
        # aws/rds key (replicas take no -c kms_key_arn)
        key = self.format_arn(service="kms", resource="alias", resource_name="aws/rds",
                              arn_format=ArnFormat.SLASH_RESOURCE_NAME)  # fmt: skip
        secondary = rds.CfnDBCluster(
            self,
            "Cluster",
            # no MasterUsername nor password: a secondary takes the primary's ("Cannot specify user
            # name for cross region replication cluster"); engine and version as the primary's
            global_cluster_identifier=self.global_cluster,
            engine=database.ENGINE.engine_type,
            engine_version=database.ENGINE.engine_version.full_version,  # type: ignore[union-attr]
            db_subnet_group_name=subnets.subnet_group_name,
            vpc_security_group_ids=[group.security_group_id],
            port=database.CLUSTER_PORT,
            storage_encrypted=True,
            kms_key_id=key,
            enable_iam_database_authentication=True,
            serverless_v2_scaling_configuration=rds.CfnDBCluster.ServerlessV2ScalingConfigurationProperty(
                min_capacity=context.read(self, "aurora_min_acu"),
                max_capacity=context.read(self, "aurora_max_acu"),
            ),
            deletion_protection=not dev,
            backup_retention_period=context.read(self, "backup_retention_days"),
            enable_cloudwatch_logs_exports=["postgresql"],
            copy_tags_to_snapshot=True,
        )
        secondary.apply_removal_policy(RemovalPolicy.DESTROY if dev else RemovalPolicy.SNAPSHOT)
        monitoring = iam.Role(
            self,
            "MonitoringRole",  # enhanced monitoring: OS metrics each minute, as home's cluster
            assumed_by=iam.ServicePrincipal("monitoring.rds.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AmazonRDSEnhancedMonitoringRole")
            ],
        )
        reader = rds.CfnDBInstance(self, "Reader", db_cluster_identifier=secondary.ref,
                                   db_instance_class="db.serverless", engine=database.ENGINE.engine_type,
                                   monitoring_interval=60, monitoring_role_arn=monitoring.role_arn,
                                   publicly_accessible=False)  # fmt: skip
        self.cluster = rds.DatabaseCluster.from_database_cluster_attributes(
            self, "Secondary", cluster_identifier=secondary.ref, port=database.CLUSTER_PORT,
            security_groups=[group], engine=database.ENGINE,
        )  # fmt: skip
        self.proxy = rds.DatabaseProxy(
            self, "Proxy", proxy_target=rds.ProxyTarget.from_cluster(self.cluster),
            secrets=list(self.role_secrets.values()), vpc=self.vpc, vpc_subnets=self.subnets,
            require_tls=True, iam_auth=True,
        )  # fmt: skip
        self.proxy.node.add_dependency(reader)  # a proxy registers a cluster with an instance up
        self.proxy.connections.allow_from(self.client_security_group, ec2.Port.tcp(database.PROXY_PORT))
        # its read-only endpoint reaches the secondary's reader before the failover: the functions'
        # logins are proven through it before home is fenced (DB_READER_HOST, the doctor's probe)
        self.reader = self.proxy.add_endpoint(
            "ReadOnly", vpc=self.vpc, vpc_subnets=self.subnets,
            target_role=rds.ProxyEndpointTargetRole.READ_ONLY,
            security_groups=self.proxy.connections.security_groups,  # which admit the functions
        )  # fmt: skip
        self.cluster.connections.allow_default_port_from(self.proxy)
        # what `hybridsync failover --deployed` moves the writer to, and checks before it does
        CfnOutput(self, "GlobalClusterId", value=self.global_cluster)
        CfnOutput(self, "ClusterArn", value=secondary.attr_db_cluster_arn)
        CfnOutput(self, "ProxyEndpoint", value=self.proxy.endpoint)
        NagSuppressions.add_resource_suppressions(
            monitoring, [{"id": "AwsSolutions-IAM4", "reason": "Enhanced monitoring's role uses the "
                          "AWS-maintained AmazonRDSEnhancedMonitoringRole policy, which RDS requires."}],
        )  # fmt: skip


class StandbyData:
    """The tables as the Region holds them (their replicas, by name and stream), the bodies bucket
    by name (it stays in home)."""

    def __init__(self, stack: Stack, entry: dict[str, Any]) -> None:
        self.tables: dict[str, dynamodb.ITableV2] = {
            name: dynamodb.TableV2.from_table_attributes(
                stack,
                f"{title(name)}Table",
                table_name=table["name"],
                table_stream_arn=table.get("stream_arn"),
            )
            for name, table in entry["tables"].items()
        }
        self.kinesis_streams = ChangeStreams()  # refused for tables fed through Kinesis (standby_stacks)
        self.buckets: dict[str, s3.IBucket] = {}
        if bucket := entry.get("bodies_bucket"):
            self.buckets["bodies"] = s3.Bucket.from_bucket_name(stack, "BodiesBucket", bucket)


class StandbyStack(PipelineStack):
    """The pipeline's consumers in a replica Region, idle until a deployed failover makes it active
    (then home's deploy disabled and these enabled): mappings and the drain schedule disabled,
    no Users step, no schema migration at deploy (home runs both; the Migrate function is here for
    the operations function's upgrades), no API, no sweep, no rotation of time series."""

    def __init__(self, scope: Construct, id: str, *, region: str, entry: dict[str, Any],
                 database: StandbyAuroraStack | None = None, **kwargs: Any) -> None:  # fmt: skip
        self.waits_in, self.entry = region, entry
        super().__init__(scope, id, data=None, database=database, **kwargs)  # type: ignore[arg-type]
        self.template_options.metadata = {STANDBY: region}

    def consuming(self) -> bool:
        """Only once a deployed failover made it active (`hybridsync failover --deployed`)."""
        return context.active_standby(self) == self.waits_in

    def rebuilt(self) -> bool:
        """Its aggregation folds only once the failover's rebuild counted its items: a deploy in
        between must not start it on aggregates the stream history would count again."""
        return bool(self.entry.get("rebuilt"))

    def sources(self, data: Any, database: Any) -> tuple[Any, Any]:
        """The Region's replicas; the Aurora secondary's stack, else your database from here."""
        return StandbyData(self, self.entry), database or StandbyDatabase(self, self.entry)

    def _logins_and_schema(self, versions: Any) -> None:
        self.migrate = self.function("Migrate", name="migrate", role="migrator", timeout=self.MIGRATE_TIMEOUT,
                                     environment=self.migrate_environment())  # fmt: skip

    def api_function(self) -> None:
        """The HTTP API stays home's."""

    def scheduled_work(self) -> None:
        """The sweep and the time series' rotation stay home's."""


class StandbyMonitoring(MonitoringStack):
    """The standby's consumers' alarms, in its Region, where their metrics are: errors, throttles,
    iterator age, dead letters, failed batches, the drain, freshness. Quiet while the standby is
    idle (its functions run nothing), they page for the new home after a failover, with the Aurora
    secondary's proxy and capacity once it is the writer (a deploy after it). An alarm notifies
    a topic of its own Region: the entry's (`hybridsync standby --alarm-topic-arn`), else one of the
    stack's (`-c alarm_email` subscribes the address there too)."""

    def __init__(self, scope: Construct, id: str, *, standby: StandbyStack, **kwargs: Any) -> None:
        Stack.__init__(self, scope, id, **kwargs)
        self.template_options.metadata = {STANDBY: standby.waits_in}  # the local app runs none
        self.alarms: dict[str, Any] = {}
        self.topic = alarm_topic(self, standby.entry.get("alarm_topic_arn") or "")
        self._functions(standby)
        self._consumers(standby)
        self._scheduled(standby)
        self._freshness(standby)
        if standby.consuming():  # the secondary's proxy has no writer to reach until the failover
            self._database(standby.database)


def standby_stacks(app: App, model: Model, prefix: str, home: Stack, **options: Any) -> dict[str, Stack]:
    """Per prepared Region, a standby stack (`<prefix>-standby-<region>`), deployed after home's
    database stack (its role secrets' replicas) and pinned to the Region, and its alarms
    (`<prefix>-standby-<region>-monitoring`)."""
    entries = prepared(app, model)
    if entries and (fed := [t.name for t in model.tables if context.change_source(app, t) == "kinesis"]):
        raise ValueError(f"-c standby: {', '.join(fed)} feed the engine through Kinesis, whose stream "
                         "stays in home: a standby cannot read them (docs/many-regions.md)")  # fmt: skip
    stacks: dict[str, Stack] = {}
    for region, entry in sorted(entries.items()):
        secondary = None
        if not context.read(app, "existing_db_secret_arn"):  # the app's Aurora: a secondary here
            secondary = StandbyAuroraStack(
                app, f"{prefix}-standby-{region}-database", entry=entry, dev=bool(context.read(app, "dev")),
                global_cluster=database.global_cluster_id(home.stack_name), env=Environment(region=region),
            )  # fmt: skip
            secondary.node.add_dependency(home)  # the global cluster and the secrets' replicas first
            stacks[f"standby-{region}-database"] = secondary
        stack = StandbyStack(app, f"{prefix}-standby-{region}", region=region, entry=entry, model=model,
                             database=secondary, env=Environment(region=region), **options)  # fmt: skip
        stack.node.add_dependency(home)  # its replica secrets first
        stacks[f"standby-{region}"] = stack
        stacks[f"standby-{region}-monitoring"] = StandbyMonitoring(
            app, f"{prefix}-standby-{region}-monitoring", standby=stack, env=Environment(region=region)
        )
    return stacks
