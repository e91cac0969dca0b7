"""The dependency layer, the one code asset and the function construct every engine function uses,
all bundled without Docker."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, Duration, ILocalBundling, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagSuppressions
from constructs import Construct

import hybridsync
from hybridsync.truth import context

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.X86_64
# Wheels the Lambda runtime (Amazon Linux 2023, glibc 2.34, x86_64) can load.
WHEEL_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64")
# Never run: local bundling always succeeds or raises. CDK requires an image all the same.
_NO_DOCKER = DockerImage.from_registry("public.ecr.aws/sam/build-python3.12")
ENGINE = Path(hybridsync.__file__).resolve().parent
REQUIREMENTS = Path(__file__).resolve().parent / "requirements-runtime.txt"
# What ships of the engine, by package: its top level (`__init__.py`) and these packages. The local
# app, the CLI, the CDK app, the deploy truth, the workloads, the test plugin and the sizing
# arithmetic are other packages: never shipped.
SHIPPED = (
    "",
    "streams",
    "model",
    "model/declare",
    "runtime",
    "dynamodb",
    "reads",
    "api",
    "sync",
    "functions",
    "sql",
    "sql/migrations",
    "sql/migrations/versions",
)
PACKAGE_DATA = ("*.py", "*.mako")


def layer_cache() -> Path:
    """Where resolved dependency layers are kept: `$XDG_CACHE_HOME/hybridsync/layers`, else the
    user's cache folder (delete it to resolve the requirements' ranges again)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hybridsync" / "layers"


@jsii.implements(ILocalBundling)
class _PipInstallLayer:
    """`pip install --platform ... --only-binary=:all:` of the runtime requirements into python/,
    once per requirements text and pip arguments on this machine: a synth into a fresh `cdk.out`
    copies it from `layer_cache()`, as a synth into the same one reuses its bundle (CDK hashes the
    layer's source, the requirements file)."""

    def __init__(self, requirements: Path):
        self.requirements = requirements

    def try_bundle(self, output_dir: str, *_options: Any, **_kw: Any) -> bool:
        platforms = [arg for p in WHEEL_PLATFORMS for arg in ("--platform", p)]
        arguments = ["--only-binary=:all:", *platforms, "--implementation", "cp",
                     "--python-version", RUNTIME.name.removeprefix("python")]  # fmt: skip
        # pip reads dependencies' markers against the interpreter it runs on, whatever the target
        key = "\0".join(
            [*arguments, sys.version, platform.machine(), version("pip"), self.requirements.read_text()]
        )
        resolved = layer_cache() / hashlib.sha256(key.encode()).hexdigest()[:16]
        if (resolved / "complete").is_file():
            shutil.copytree(resolved / "python", Path(output_dir) / "python", dirs_exist_ok=True)
            return True
        try:
            resolved.parent.mkdir(parents=True, exist_ok=True)
            draft = Path(tempfile.mkdtemp(prefix=".draft-", dir=resolved.parent))
        except OSError:  # no cache to write (a read-only home): resolve into this cdk.out alone
            self._install(arguments, Path(output_dir))
            return True
        try:
            self._install(arguments, draft)
            (draft / "complete").write_text("")  # last: an entry without it is not one
            with contextlib.suppress(OSError):  # another synth resolved it first: either will do
                draft.rename(resolved)
            done = resolved if (resolved / "complete").is_file() else draft  # else a broken entry: ours
            shutil.copytree(done / "python", Path(output_dir) / "python", dirs_exist_ok=True)
        finally:
            shutil.rmtree(draft, ignore_errors=True)
        return True

    def _install(self, arguments: list[str], folder: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-qq", "--disable-pip-version-check", "--no-compile",
             *arguments, "--target", str(folder / "python"), "-r", str(self.requirements)],
            check=True,
        )  # fmt: skip


@jsii.implements(ILocalBundling)
class _CopyPackages:
    """The engine's shipped packages and the project's packages (its model's, its routes'; and its
    revisions, when they live elsewhere), as plain files."""

    def __init__(self, packages: list[Path], migrations: Path | None, files: dict[str, Path]):
        self.packages, self.migrations, self.files = packages, migrations, files

    def try_bundle(self, output_dir: str, *_options: Any, **_kw: Any) -> bool:
        out = Path(output_dir)
        for package in SHIPPED:
            source, target = ENGINE / package, out / "hybridsync" / package
            target.mkdir(parents=True, exist_ok=True)
            for pattern in PACKAGE_DATA:
                for path in source.glob(pattern):
                    shutil.copy2(path, target / path.name)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for project in self.packages:
            shutil.copytree(project, out / project.name, dirs_exist_ok=True, ignore=ignore)
        if self.migrations is not None:
            shutil.copytree(self.migrations, out / PROJECT_MIGRATIONS, dirs_exist_ok=True, ignore=ignore)
        for name, source in self.files.items():
            shutil.copy2(source, out / name)
        return True


PROJECT_MIGRATIONS = "_migrations"  # the project's revisions in the asset, when kept outside its package
TRUST_STORE = "hybridsync-trust.pem"  # `-c db_root_certificates=`'s bundle, in the asset


def function_code(
    packages: list[Path], migrations: Path | None, files: dict[str, Path] | None = None
) -> lambda_.Code:
    """One asset for every function: the engine's packages and the project's (see SHIPPED), and
    `files` (name in the asset -> a file of the project's); the first package, the model's, is the
    asset's source folder."""
    return lambda_.Code.from_asset(
        str(packages[0]),
        # Output hash: the bundle also holds the engine and any other package of the project.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(image=_NO_DOCKER, local=_CopyPackages(packages, migrations, files or {})),
    )


def dependency_layer(scope: Construct, id: str) -> lambda_.LayerVersion:
    """The engine's runtime requirements, for the Lambda runtime's platform."""
    return lambda_.LayerVersion(
        scope,
        id,
        # The asset's source is the requirements file alone, so the bundle is reused until it changes.
        code=lambda_.Code.from_asset(
            str(REQUIREMENTS.parent),
            exclude=["*", f"!{REQUIREMENTS.name}"],
            bundling=BundlingOptions(image=_NO_DOCKER, local=_PipInstallLayer(REQUIREMENTS)),
        ),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="hybridsync runtime dependencies (powertools, sqlalchemy, psycopg, alembic)",
    )


class HandlerFunction(Construct):
    """One engine function: `hybridsync.functions.<name>.handler` in the shared asset, on the shared layer.

    Every handler gets the same runtime, architecture, log retention, Powertools settings and
    tracing switch; callers add only what differs (environment, VPC, timeout, memory). Each deploy
    that changes it publishes a version, and `alias` (`live`) points at it: the mappings, the API
    and the schedules invoke the alias, so a version in service never changes under them.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        code: lambda_.Code,
        layer: lambda_.ILayerVersion,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_size: int = 512,
        tracing: bool = False,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        vpc: ec2.IVpc | None = None,
        subnets: ec2.SubnetSelection | None = None,
        security_groups: list[ec2.ISecurityGroup] | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        names = context.names(self)  # the metrics' namespace and service: the stack's own
        if not (ENGINE / "functions" / f"{name}.py").is_file():
            raise FileNotFoundError(f"the engine has no function {name!r} (hybridsync/functions/{name}.py)")
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"hybridsync.functions.{name}.handler",
            code=code,
            layers=[layer],
            environment={
                "POWERTOOLS_SERVICE_NAME": f"{names}-{name}",
                "POWERTOOLS_METRICS_NAMESPACE": names,
                "POWERTOOLS_LOG_LEVEL": "INFO",
                "POWERTOOLS_TRACE_DISABLED": "false" if tracing else "true",
                **(environment or {}),
            },
            timeout=timeout or Duration.seconds(60),
            memory_size=memory_size,
            tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED,
            log_group=self.log_group,
            vpc=vpc,
            vpc_subnets=subnets,
            security_groups=security_groups,
            dead_letter_queue=dead_letter_queue,
            reserved_concurrent_executions=reserved_concurrency or None,
        )
        self.alias = lambda_.Alias(self, "Live", alias_name="live", version=self.function.current_version)


def suppress_function_findings(handler: HandlerFunction, *, in_vpc: bool, tracing: bool) -> None:
    """cdk-nag's findings on every engine function, each with its reason."""
    NagSuppressions.add_resource_suppressions(
        handler.function,
        [
            {
                "id": "AwsSolutions-L1",
                "reason": "Runtime pinned to Python 3.12: the dependency layer's "
                "wheels are built for cp312; move both together.",
            }
        ],
    )
    managed = ["AWSLambdaBasicExecutionRole"] + (["AWSLambdaVPCAccessExecutionRole"] if in_vpc else [])
    NagSuppressions.add_resource_suppressions(
        handler.function.role,
        [
            {
                "id": "AwsSolutions-IAM4",
                "reason": "AWS-maintained policies for logs and VPC network "
                "interfaces only; data access is granted per resource.",
                "applies_to": [
                    f"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{p}" for p in managed
                ],
            }
        ],
        apply_to_children=True,
    )
    if tracing:
        NagSuppressions.add_resource_suppressions(
            handler.function.role,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "X-Ray trace segments cannot be scoped to a resource.",
                    "applies_to": ["Resource::*"],
                }
            ],
            apply_to_children=True,
        )
