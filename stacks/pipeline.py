"""Pipeline stack: the shared dependency layer, the functions, and the schema migration on deploy."""

from __future__ import annotations

import hashlib
from typing import Any

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from cdk_nag import NagSuppressions
from constructs import Construct

from hybridsync.db import MIGRATIONS
from stacks.data import DataStack
from stacks.database import DatabaseStack
from stacks.functions import HandlerFunction, dependency_layer


def _migrations_digest() -> str:
    """Changes whenever a migration file does, so the schema resource re-runs on such a deploy."""
    digest = hashlib.sha256()
    for path in sorted(MIGRATIONS.rglob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


class PipelineStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        data: DataStack,
        database: DatabaseStack,
        tracing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.data = data
        self.database = database
        self.tracing = tracing
        self.layer = dependency_layer(self, "Dependencies")
        self.table_environment = {
            f"TABLE_{name.upper()}": table.table_name for name, table in data.tables.items()
        }

        migrate = self.function("Migrate", name="migrate", timeout=Duration.minutes(5), sql=True)
        provider = cr.Provider(
            self,
            "SchemaProvider",
            on_event_handler=migrate.function,
            log_group=logs.LogGroup(self, "SchemaProviderLogs", retention=logs.RetentionDays.ONE_MONTH),
        )
        CustomResource(
            self,
            "Schema",
            service_token=provider.service_token,
            properties={"MigrationsDigest": _migrations_digest()},
        )
        NagSuppressions.add_resource_suppressions(
            provider,
            [
                {"id": "AwsSolutions-IAM4", "reason": "CDK's custom resource framework uses the "
                 "AWS-maintained basic execution policy for its own logs."},
                {"id": "AwsSolutions-IAM5", "reason": "The framework may invoke every version of the "
                 "one migration function (`<arn>:*`), nothing else."},
                {"id": "AwsSolutions-L1", "reason": "The framework function's runtime is chosen and "
                 "updated by aws-cdk-lib."},
            ],
            apply_to_children=True,
        )  # fmt: skip

    def function(
        self,
        id: str,
        *,
        name: str,
        sql: bool = False,
        environment: dict[str, str] | None = None,
        **options: Any,
    ) -> HandlerFunction:
        """A handler with the table names in its environment; with `sql`, also network access to
        PostgreSQL and read access to its secret."""
        in_vpc = sql and self.database.vpc is not None
        handler = HandlerFunction(
            self,
            id,
            name=name,
            layer=self.layer,
            environment={**self.table_environment, **(environment or {})},
            tracing=self.tracing,
            vpc=self.database.vpc if in_vpc else None,
            security_groups=[self.database.client_security_group] if in_vpc else None,  # type: ignore[list-item]
            **options,
        )
        if sql:
            for key, value in self.database.connect(handler.function).items():
                handler.function.add_environment(key, value)
        NagSuppressions.add_resource_suppressions(
            handler.function,
            [{"id": "AwsSolutions-L1", "reason": "Runtime pinned to Python 3.12: the dependency layer's "
              "wheels are built for cp312; move both together."}],
        )  # fmt: skip
        managed = ["AWSLambdaBasicExecutionRole"] + (["AWSLambdaVPCAccessExecutionRole"] if in_vpc else [])
        NagSuppressions.add_resource_suppressions(
            handler.function.role,
            [{"id": "AwsSolutions-IAM4", "reason": "AWS-maintained policies for logs and VPC network "
              "interfaces only; data access is granted per resource.",
              "applies_to": [f"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{p}"
                             for p in managed]}],
            apply_to_children=True,
        )  # fmt: skip
        if self.tracing:
            NagSuppressions.add_resource_suppressions(
                handler.function.role,
                [{"id": "AwsSolutions-IAM5", "reason": "X-Ray trace segments cannot be scoped to a "
                  "resource.", "applies_to": ["Resource::*"]}],
                apply_to_children=True,
            )  # fmt: skip
        return handler
