"""Database stack: Aurora PostgreSQL Serverless v2 behind RDS Proxy in a NAT-less VPC, or an existing
database named by its Secrets Manager secret, in the VPC it lives in (optionally behind a proxy).

Every function logs in as one of three roles (hybridsync.sql.roles), each with a secret of its own,
rotated on a schedule: through a proxy with an IAM token (no password in any function), or, to an
existing database without a proxy, with its role's password. TLS is verified (`verify-full`)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync import truth
from hybridsync.cdk.data import customer_key
from hybridsync.sql import roles
from hybridsync.truth import context

DATABASE_NAME = "hybridsync"
ADMIN = "hybridsync"  # the cluster's master user: only the Users resource logs in as it
PROXY_PORT = 5432
CLUSTER_PORT = 5438  # not the default port (AwsSolutions-RDS11)
ENGINE = rds.DatabaseClusterEngine.aurora_postgres(version=rds.AuroraPostgresEngineVersion.VER_17_9)


def global_cluster_id(database_stack: str) -> str:
    """The Aurora Global Database home's cluster becomes the primary of once a standby is prepared:
    the standby's secondary joins it by this name, which both derive from home's database stack."""
    return f"{database_stack}-global".lower()


class DatabaseStack(Stack):
    """Provides `vpc`, `subnets`, `client_security_group`, `proxy`, `cluster`, the admin's and the
    roles' secrets, and `connect(function, role)`."""

    def __init__(self, scope: Construct, id: str, *, dev: bool = False, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.proxy: rds.DatabaseProxy | None = None
        self.cluster: rds.IDatabaseCluster | None = None  # an Aurora cluster of the app's
        self.key = customer_key(self)
        self.admin_user: str | None = ADMIN  # None: the existing database's (in its secret)
        self.role_secrets: dict[str, secretsmanager.ISecret] = {}
        # botocore's AWS_ENDPOINT_URL_<SERVICE> -> an interface endpoint's name, for the clients of a
        # service whose endpoint has no private DNS
        self.endpoint_urls: dict[str, str] = {}
        self._secrets_endpoint: ec2.InterfaceVpcEndpoint | None = None
        self.role_rotation_groups: dict[str, ec2.SecurityGroup] = {}  # rotate_roles schedules them
        self.database_name: str = DATABASE_NAME
        self.provide(dev)

    def provide(self, dev: bool) -> None:
        """The database, its network and its logins: an Aurora cluster of the app's, or yours."""
        existing = context.read(self, "existing_db_secret_arn")
        if existing:
            self._existing(existing)
            self.database_name = context.read(self, "existing_db_name")
        else:
            self._create_cluster(dev)
        CfnOutput(self, "DatabaseSecretArn", value=self.admin_secret.secret_arn)

    # --- where the database lives -----------------------------------------------------------------

    def _create_cluster(self, dev: bool) -> None:
        self._create_network()
        cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=ENGINE,
            writer=rds.ClusterInstance.serverless_v2("Writer"),
            serverless_v2_min_capacity=context.read(self, "aurora_min_acu"),
            serverless_v2_max_capacity=context.read(self, "aurora_max_acu"),
            vpc=self.vpc,
            vpc_subnets=self.subnets,
            credentials=rds.Credentials.from_generated_secret(ADMIN, encryption_key=self.key),
            default_database_name=DATABASE_NAME,
            port=CLUSTER_PORT,
            storage_encrypted=True,
            storage_encryption_key=self.key,
            iam_authentication=True,
            deletion_protection=not dev,
            removal_policy=RemovalPolicy.DESTROY if dev else RemovalPolicy.SNAPSHOT,
            backup=rds.BackupProps(retention=Duration.days(context.read(self, "backup_retention_days"))),
            cloudwatch_logs_exports=["postgresql"],
            monitoring_interval=Duration.seconds(60),  # enhanced monitoring: OS metrics each minute
        )
        assert cluster.secret is not None
        self.admin_secret: secretsmanager.ISecret = cluster.secret
        self.cluster = cluster
        self._cluster_logins(cluster)
        if standby := context.standbys(self):
            self._global(cluster, dev, sorted(standby))
        # Every login through the proxy is IAM: the proxy alone holds the passwords.
        self.proxy = cluster.add_proxy(
            "Proxy",
            secrets=[cluster.secret, *self.role_secrets.values()],
            vpc=self.vpc,
            vpc_subnets=self.subnets,
            require_tls=True,
            iam_auth=True,
        )
        # RDS Proxy always listens on the engine's standard port, whatever the cluster's.
        self.proxy.connections.allow_from(self.client_security_group, ec2.Port.tcp(PROXY_PORT))
        cluster.connections.allow_default_port_from(self.proxy)
        CfnOutput(self, "ProxyEndpoint", value=self.proxy.endpoint)
        NagSuppressions.add_resource_suppressions(
            cluster,
            [{"id": "AwsSolutions-IAM4", "reason": "Enhanced monitoring's role uses the AWS-maintained "
              "AmazonRDSEnhancedMonitoringRole policy, which RDS requires."}],
            apply_to_children=True,
        )  # fmt: skip

    def _create_network(self) -> None:
        """The database's VPC: private subnets only, the endpoints its functions reach AWS through,
        and the security group of the database's clients."""
        self.vpc: ec2.IVpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,  # functions reach AWS services through endpoints, never the internet
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
            flow_logs={"Rejected": ec2.FlowLogOptions(traffic_type=ec2.FlowLogTrafficType.REJECT)},
        )
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        self.vpc.add_gateway_endpoint("DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)  # review bodies
        interface = ec2.InterfaceVpcEndpointAwsService
        # Streams has no gateway endpoint and its interface endpoint no private DNS: the clients are
        # given its name (the DynamoDB guide, "AWS PrivateLink for DynamoDB Streams")
        for name, service, variable in (("SecretsManager", interface.SECRETS_MANAGER, None),
                                        ("Lambda", interface("lambda"), None),
                                        ("DynamoDbStreams", interface.DYNAMODB_STREAMS,
                                         "dynamodbstreams")):  # fmt: skip
            endpoint = self._interface_endpoint(self.vpc, name, service, variable)
            NagSuppressions.add_resource_suppressions(
                endpoint,
                [{"id": "CdkNagValidationFailure", "reason": "EC23 cannot resolve the VPC CIDR token; the "
                  "endpoint group admits HTTPS from the VPC's own CIDR only."}],
                apply_to_children=True,
            )  # fmt: skip
        self.client_security_group: ec2.ISecurityGroup = self._source_group(
            self, "DatabaseClients", "functions that talk to PostgreSQL"
        )

    def _cluster_logins(self, cluster: rds.DatabaseCluster) -> None:
        """Each role's login (its secret attached to the cluster), and every secret's rotation: the
        admin's only once the writer is up."""
        for role in roles.ROLES:  # each with the cluster's host, port and engine (the attachment)
            secret = rds.DatabaseSecret(self, f"{role.title()}Secret", username=roles.user(role),
                                        dbname=DATABASE_NAME, encryption_key=self.key,
                                        replica_regions=self._replica_regions())  # fmt: skip
            _rotated_after_its_login(secret)
            self.role_secrets[role] = secret.attach(cluster)
            CfnOutput(self, f"{role.title()}SecretArn", value=secret.secret_arn)  # `hybridsync standby`
        admin_rotation = self._rotate(cluster.secret, cluster.connections, "admin")
        # the schedule rotates at once when created (RotateImmediatelyOnUpdate, true by default), and the
        # cluster takes logins only once its writer instance is up: CloudFormation would otherwise make
        # the schedule beside the cluster, before the instance; the rotation-order rule checks it
        assert admin_rotation is not None
        admin_rotation.node.add_dependency(cluster.node.find_child("Writer"))
        for role, secret in self.role_secrets.items():
            self._rotate(secret, cluster.connections, role)

    def _global(self, cluster: rds.DatabaseCluster, dev: bool, standby: list[str]) -> None:
        """The cluster as the primary of an Aurora Global Database, which each standby Region's
        secondary joins (AWS::RDS::GlobalCluster: from `SourceDBClusterIdentifier`, engine, version
        and encryption are the cluster's). `hybridsync failover --deployed` moves its writer there."""
        joined = rds.CfnGlobalCluster(
            self,
            "GlobalCluster",
            global_cluster_identifier=global_cluster_id(self.stack_name),
            # its identifier: CloudFormation's handler looks the cluster up and passes RDS its ARN
            source_db_cluster_identifier=cluster.cluster_identifier,
            deletion_protection=not dev,
        )
        joined.node.add_dependency(cluster.node.find_child("Writer"))  # a cluster joins with its writer up
        secondaries = ", ".join(standby)
        CfnOutput(self, "GlobalClusterId", value=joined.ref,
                  description=f"an Aurora Global Database with secondaries in {secondaries}")  # fmt: skip

    def _replica_regions(self) -> list[secretsmanager.ReplicaRegion] | None:
        """Each standby Region, where a role secret's replica serves the standby's functions (and its
        proxy, with Aurora): Secrets Manager, "Replicate secrets": the same ARN but the Region; rotated
        here, the value follows. Under aws/secretsmanager there (replicas refuse -c kms_key_arn)."""
        regions = [secretsmanager.ReplicaRegion(region=r) for r in sorted(context.standbys(self))]
        return regions or None

    def _existing(self, secret_arn: str) -> None:
        """An existing database: in the VPC, subnets and security group it lives in (never a public
        one by default: synth refuses without them), its admin's secret given."""
        vpc_id = context.read(self, "existing_db_vpc_id")
        subnet_ids = [s for s in str(context.read(self, "existing_db_subnet_ids") or "").split(",") if s]
        group_id = context.read(self, "existing_db_security_group_id")
        if not (vpc_id and subnet_ids and group_id):
            raise ValueError(
                "-c existing_db_secret_arn needs the database's network: -c existing_db_vpc_id=vpc-..., "
                "-c existing_db_subnet_ids=subnet-a,subnet-b and -c existing_db_security_group_id=sg-... "
                "(the functions run beside it; a database reachable from the internet is no default)"
            )
        self.admin_user = None
        self.admin_secret = secretsmanager.Secret.from_secret_complete_arn(self, "ExistingSecret", secret_arn)
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self, "Vpc", vpc_id=vpc_id, availability_zones=self.availability_zones[: len(subnet_ids)]
        )
        self.subnets = ec2.SubnetSelection(
            subnets=[ec2.Subnet.from_subnet_id(self, f"Subnet{i}", s) for i, s in enumerate(subnet_ids)]
        )
        self.client_security_group = self._source_group(
            self, "DatabaseClients", "functions that talk to PostgreSQL"
        )
        database = ec2.SecurityGroup.from_security_group_id(self, "DatabaseGroup", group_id, mutable=True)
        port = int(context.read(self, "existing_db_port"))
        database_side = ec2.Connections(security_groups=[database], default_port=ec2.Port.tcp(port))
        if context.read(self, "existing_db_endpoints"):
            self._endpoints()
        else:
            self._routes_given(self.client_security_group)
            # Streams has no gateway endpoint and its interface endpoint no private DNS: without a NAT,
            # the functions reach it only by the name of an endpoint of yours
            if streams := context.read(self, "existing_db_streams_endpoint"):
                self.endpoint_urls[truth.ENDPOINT_VARIABLE["dynamodbstreams"]] = streams
        for role in roles.ROLES:
            secret = self.role_secrets[role] = self._role_secret(role)
            _rotated_after_its_login(secret)
            self._rotate(secret, database_side, role)
        database_side.allow_default_port_from(self.client_security_group)  # the Users resource, direct
        target_instance = context.read(self, "existing_db_instance_id")
        target_cluster = context.read(self, "existing_db_cluster_id")
        if not context.read(self, "existing_db_proxy"):
            return
        if bool(target_instance) == bool(target_cluster):
            raise ValueError(
                "-c existing_db_proxy=true needs the proxy's target: -c existing_db_instance_id=... (RDS "
                "for PostgreSQL) or -c existing_db_cluster_id=... (Aurora PostgreSQL)"
            )
        if target_instance:
            instance = rds.DatabaseInstance.from_database_instance_attributes(
                self, "Target", instance_identifier=target_instance, instance_endpoint_address="unused",
                port=port, security_groups=[database], engine=rds.DatabaseInstanceEngine.POSTGRES,
            )  # fmt: skip
            target = rds.ProxyTarget.from_instance(instance)
        else:
            cluster = rds.DatabaseCluster.from_database_cluster_attributes(
                self, "Target", cluster_identifier=target_cluster, port=port, security_groups=[database],
                engine=rds.DatabaseClusterEngine.AURORA_POSTGRESQL,
            )  # fmt: skip
            target = rds.ProxyTarget.from_cluster(cluster)
        self.proxy = rds.DatabaseProxy(
            self, "Proxy", proxy_target=target, secrets=list(self.role_secrets.values()), vpc=self.vpc,
            vpc_subnets=self.subnets, require_tls=True, iam_auth=True,
        )  # fmt: skip
        self.proxy.connections.allow_from(self.client_security_group, ec2.Port.tcp(PROXY_PORT))
        database_side.allow_default_port_from(self.proxy)
        CfnOutput(self, "ProxyEndpoint", value=self.proxy.endpoint)

    def _role_secret(self, role: str) -> secretsmanager.Secret:
        """A role's login to your database (host, port and name are copied in from the admin's by the
        Users resource), replicated to each standby Region, whose functions read it there (Secrets
        Manager, "Replicate secrets": the same ARN but the Region; rotated here, the value follows)."""
        secret = secretsmanager.Secret(
            self,
            f"{role.title()}Secret",
            encryption_key=self.key,
            replica_regions=self._replica_regions(),
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=f'{{"username": "{roles.user(role)}", "engine": "postgres"}}',
                generate_string_key="password",
                exclude_characters=" %+~`#$&*()|[]{}:;<>?!'/@\"\\",  # as RDS's own secrets
            ),
        )
        CfnOutput(self, f"{role.title()}SecretArn", value=secret.secret_arn)  # `hybridsync standby` reads it
        return secret

    def _endpoints(self) -> None:
        """Interface endpoints in the given subnets for what the functions call (the VPC's own
        routes are the team's: `-c existing_db_endpoints=false` when it already reaches them).
        DynamoDB's and Streams' have no private DNS (their PrivateLink pages): the clients get their
        names (botocore's `AWS_ENDPOINT_URL_<SERVICE>`). S3's private DNS answers every resolver: with
        no S3 gateway endpoint in the VPC, inbound-only DNS fails the deploy (S3's PrivateLink page)."""
        interface = ec2.InterfaceVpcEndpointAwsService
        for name, service, variable in (("SecretsManager", interface.SECRETS_MANAGER, None),
                                        ("DynamoDb", interface.DYNAMODB, "dynamodb"),
                                        ("DynamoDbStreams", interface.DYNAMODB_STREAMS, "dynamodbstreams"),
                                        ("S3", interface.S3, None),
                                        ("Lambda", interface("lambda"), None)):  # fmt: skip
            every_resolver = ec2.VpcEndpointPrivateDnsOnlyForInboundResolverEndpoint.ALL_RESOLVERS
            endpoint = self._interface_endpoint(
                self, f"{name}Endpoint", service, variable, subnets=self.subnets, open=False,
                private_dns_only_for_inbound_resolver_endpoint=every_resolver if name == "S3" else None,
            )  # fmt: skip
            endpoint.connections.allow_default_port_from(self.client_security_group)
            if name == "SecretsManager":
                self._secrets_endpoint = endpoint  # the rotations' groups are let in too (_rotate)

    def _source_group(self, scope: Construct, id: str, description: str) -> ec2.SecurityGroup:
        """A security group others admit by name (the database, the proxy): it has no ingress."""
        group = ec2.SecurityGroup(scope, id, vpc=self.vpc, description=description)
        NagSuppressions.add_resource_suppressions(
            group, [{"id": "AwsSolutions-EC23", "reason": "No ingress rules; it is only a source group."}]
        )
        return group

    def _interface_endpoint(
        self,
        scope: Construct,
        id: str,
        service: ec2.IInterfaceVpcEndpointService,
        variable: str | None,
        **options: Any,
    ) -> ec2.InterfaceVpcEndpoint:
        """An interface endpoint in the database's VPC: with private DNS, or (`variable`: a service
        without it) its name handed to the clients as botocore's `AWS_ENDPOINT_URL_<SERVICE>`."""
        endpoint = ec2.InterfaceVpcEndpoint(scope, id, vpc=self.vpc, service=service,
                                            private_dns_enabled=variable is None, **options)  # fmt: skip
        if variable:
            self.endpoint_urls[truth.ENDPOINT_VARIABLE[variable]] = _url(endpoint)
        return endpoint

    @staticmethod
    def _routes_given(group: ec2.SecurityGroup) -> None:
        """The team's VPC routes serve this group (`-c existing_db_endpoints=false`): the deploy truth
        cannot see them, `hybridsync doctor --deployed` checks them (hybridsync.truth.reach)."""
        group.node.default_child.add_metadata(  # type: ignore[union-attr]
            "hybridsync:routes", "the VPC's own routes (-c existing_db_endpoints=false)"
        )

    def _rotate(
        self, secret: Any, database: ec2.Connections, whose: str
    ) -> secretsmanager.RotationSchedule | None:
        """Single-user rotation every `db_rotation_days`: AWS's hosted function, in the database's
        network (a group the database and the Secrets Manager endpoint admit), sets the login's new
        password with its current one. The admin's is scheduled here (its login comes with the
        cluster); a role's by `rotate_roles`, after the step that makes its login."""
        group = self._source_group(secret, "RotationGroup", f"rotation of the {whose} password")
        database.allow_default_port_from(group)
        if self._secrets_endpoint is not None:  # the hosted rotation calls Secrets Manager from the VPC
            self._secrets_endpoint.connections.allow_default_port_from(group)
        elif self.cluster is None and not context.read(self, "existing_db_endpoints"):
            self._routes_given(group)
        if whose == "admin":
            return self._schedule(self, secret, group)
        self.role_rotation_groups[whose] = group
        return None

    def rotate_roles(self, scope: Construct, after: Construct) -> None:
        """Each role's rotation schedule, in `scope`'s stack and after `after` (the Users step, which
        makes the logins): a schedule rotates at once when created ("By default, Secrets Manager
        rotates the secret immediately", AWS::SecretsManager::RotationSchedule), and a rotation of a
        login that does not exist yet fails, leaving an AWSPENDING version that later rotations
        take for one in progress (RotateSecret)."""
        for role, group in self.role_rotation_groups.items():
            schedule = self._schedule(scope, self.role_secrets[role], group, f"{role.title()}Rotation")
            schedule.node.add_dependency(after)

    def _schedule(
        self, scope: Construct, secret: Any, group: ec2.ISecurityGroup, id: str = "Rotation"
    ) -> secretsmanager.RotationSchedule:
        return secretsmanager.RotationSchedule(
            scope,
            id,
            secret=secret,
            automatically_after=Duration.days(context.read(self, "db_rotation_days")),
            hosted_rotation=secretsmanager.HostedRotation.postgre_sql_single_user(
                vpc=self.vpc, vpc_subnets=self.subnets, security_groups=[group]
            ),
        )

    # --- who connects ------------------------------------------------------------------------------

    def connect(self, function: lambda_.Function, role: str) -> dict[str, str]:
        """Let a function log in as `role` (hybridsync.sql.roles, or "admin": the Users resource); its
        environment. Through the proxy: IAM (`rds-db:connect` for that login only), no secret read.
        Without one: the role's secret, the only one it may read."""
        if role == "admin":  # the logins' maker: the admin, at deploy only
            if self.proxy is not None and self.admin_user is not None:
                self.proxy.grant_connect(function, self.admin_user)
                return self._through_proxy(self.admin_user) | {"DB_ROLE": role}
            self.grant_secret_read(self.admin_secret, function)
            return {"DB_SECRET_ARN": self.admin_secret.secret_arn, "DB_ROLE": role}
        if self.proxy is not None:
            self.proxy.grant_connect(function, roles.user(role))
            return self._through_proxy(roles.user(role)) | {"DB_ROLE": role}
        self.grant_secret_read(self.role_secrets[role], function)
        return {"DB_SECRET_ARN": self.role_secrets[role].secret_arn, "DB_ROLE": role}

    def grant_secret_read(self, secret: secretsmanager.ISecret, function: lambda_.IFunction) -> None:
        """Read a secret of this stack's: GetSecretValue, and kms:Decrypt on the customer key it is
        under (Secrets Manager, "Permissions for the KMS key"; a target attachment does not carry
        its secret's key, so CDK's own grant leaves it out)."""
        secret.grant_read(function)
        if self.key is not None:
            self.key.grant_decrypt(function)

    def _through_proxy(self, user: str) -> dict[str, str]:
        assert self.proxy is not None
        return {"DB_IAM_AUTH": "true", "DB_USER": user, "DB_HOST": self.proxy.endpoint,
                "DB_PORT": str(PROXY_PORT), "DB_NAME": self.database_name}  # fmt: skip


def _url(endpoint: ec2.InterfaceVpcEndpoint) -> str:
    """An interface endpoint's regional name as a URL (its first DNS entry, `<zone id>:<name>`)."""
    return "https://" + Fn.select(1, Fn.split(":", Fn.select(0, endpoint.vpc_endpoint_dns_entries)))


def _rotated_after_its_login(secret: Construct) -> None:
    NagSuppressions.add_resource_suppressions(
        secret,
        [{"id": "AwsSolutions-SMG4", "reason": "Rotated by a schedule in the pipeline stack, after the "
          "Users step makes its login (rotate_roles; the deploy truth's rotation-order rule checks it)."}],
    )  # fmt: skip
