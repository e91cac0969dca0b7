"""Database stack: Aurora PostgreSQL Serverless v2 behind RDS Proxy in a NAT-less VPC, or an existing
database named by its Secrets Manager secret."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync import context

DATABASE_NAME = "hybridsync"
PROXY_PORT = 5432


class DatabaseStack(Stack):
    """Provides `vpc` (None for an existing database), `secret`, and `connect(function)`."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        existing_secret_arn: str | None = None,
        dev: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.vpc: ec2.IVpc | None = None
        self.proxy: rds.DatabaseProxy | None = None
        self.cluster: rds.DatabaseCluster | None = None
        self.client_security_group: ec2.ISecurityGroup | None = None
        if existing_secret_arn:
            # The secret holds host, port, username, password and dbname (the RDS secret shape).
            # Its network is the caller's: functions run outside a VPC and reach the host directly.
            self.secret: secretsmanager.ISecret = secretsmanager.Secret.from_secret_complete_arn(
                self, "ExistingSecret", existing_secret_arn
            )
        else:
            self._create_cluster(dev)
        CfnOutput(self, "DatabaseSecretArn", value=self.secret.secret_arn)

    def _create_cluster(self, dev: bool) -> None:
        self.vpc = ec2.Vpc(
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
        self.vpc.add_gateway_endpoint("DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)  # review bodies
        secrets_endpoint = self.vpc.add_interface_endpoint(
            "SecretsManager", service=ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER
        )
        NagSuppressions.add_resource_suppressions(
            secrets_endpoint,
            [{"id": "CdkNagValidationFailure", "reason": "EC23 cannot resolve the VPC CIDR token; the "
              "endpoint group admits HTTPS from the VPC's own CIDR only."}],
            apply_to_children=True,
        )  # fmt: skip
        self.client_security_group = ec2.SecurityGroup(
            self, "DatabaseClients", vpc=self.vpc, description="functions that talk to PostgreSQL"
        )
        cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=rds.DatabaseClusterEngine.aurora_postgres(
                version=rds.AuroraPostgresEngineVersion.VER_17_9
            ),
            writer=rds.ClusterInstance.serverless_v2("Writer"),
            serverless_v2_min_capacity=context.read(self, "aurora_min_acu"),
            serverless_v2_max_capacity=context.read(self, "aurora_max_acu"),
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            credentials=rds.Credentials.from_generated_secret("hybridsync"),
            default_database_name=DATABASE_NAME,
            port=5438,  # not the default port (AwsSolutions-RDS11)
            storage_encrypted=True,
            iam_authentication=True,
            deletion_protection=not dev,
            removal_policy=RemovalPolicy.DESTROY if dev else RemovalPolicy.SNAPSHOT,
            backup=rds.BackupProps(retention=Duration.days(context.read(self, "backup_retention_days"))),
            cloudwatch_logs_exports=["postgresql"],
            monitoring_interval=Duration.seconds(60),  # enhanced monitoring: OS metrics each minute
        )
        assert cluster.secret is not None
        self.secret, self.cluster = cluster.secret, cluster
        self.proxy = cluster.add_proxy(
            "Proxy", secrets=[cluster.secret], vpc=self.vpc, require_tls=True, iam_auth=False
        )
        # RDS Proxy always listens on the engine's standard port, whatever the cluster's.
        self.proxy.connections.allow_from(self.client_security_group, ec2.Port.tcp(PROXY_PORT))
        cluster.connections.allow_default_port_from(self.proxy)
        CfnOutput(self, "ProxyEndpoint", value=self.proxy.endpoint)
        NagSuppressions.add_resource_suppressions(
            cluster.node.find_child("Secret"),  # the secret itself; `cluster.secret` is its attachment
            [{"id": "AwsSolutions-SMG4", "reason": "Rotation would invalidate the password RDS Proxy "
              "caches mid-batch; rotate by redeploying with a new secret, with the pipeline paused."}],
            apply_to_children=True,
        )  # fmt: skip
        NagSuppressions.add_resource_suppressions(
            cluster,
            [{"id": "AwsSolutions-IAM4", "reason": "Enhanced monitoring's role uses the AWS-maintained "
              "AmazonRDSEnhancedMonitoringRole policy, which RDS requires."}],
            apply_to_children=True,
        )  # fmt: skip
        NagSuppressions.add_resource_suppressions(
            self.client_security_group,
            [{"id": "AwsSolutions-EC23", "reason": "No ingress rules; it is only a source group."}],
        )

    def connect(self, function: lambda_.Function) -> dict[str, str]:
        """Let a function read the credentials and reach the database; returns its environment."""
        self.secret.grant_read(function)
        env = {"DB_SECRET_ARN": self.secret.secret_arn}
        if self.proxy is not None:
            env["DB_HOST"] = self.proxy.endpoint  # connect through the proxy, not the cluster
            env["DB_NAME"] = DATABASE_NAME
        return env
