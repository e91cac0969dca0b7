"""CDK stacks: data (DynamoDB), database (PostgreSQL), pipeline (functions). Synth makes no AWS calls."""

from __future__ import annotations

from aws_cdk import App, Aspects
from cdk_nag import AwsSolutionsChecks

from stacks.api import ApiStack
from stacks.checks import CheckovSkips
from stacks.data import DataStack
from stacks.database import DatabaseStack
from stacks.pipeline import PipelineStack


def _flag(app: App, name: str) -> bool:
    return str(app.node.try_get_context(name) or "false").lower() in ("true", "1", "yes")


def build(app: App) -> dict[str, object]:
    """The whole deployment. Context: `prefix`, `dev`, `existing_db_secret_arn`, `tracing`,
    `public_api`."""
    prefix = app.node.try_get_context("prefix") or "HybridSync"
    dev = _flag(app, "dev")
    data = DataStack(app, f"{prefix}-data", dev=dev)
    database = DatabaseStack(
        app,
        f"{prefix}-database",
        existing_secret_arn=app.node.try_get_context("existing_db_secret_arn") or None,
        dev=dev,
    )
    pipeline = PipelineStack(
        app, f"{prefix}-pipeline", data=data, database=database, tracing=_flag(app, "tracing")
    )
    api = ApiStack(app, f"{prefix}-api", function=pipeline.api.function, public=_flag(app, "public_api"))
    Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    Aspects.of(app).add(CheckovSkips())
    return {"data": data, "database": database, "pipeline": pipeline, "api": api}
