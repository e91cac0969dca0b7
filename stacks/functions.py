"""The dependency layer and the function construct every handler uses, both bundled without Docker."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, Duration, ILocalBundling, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.X86_64
# Wheels the Lambda runtime (Amazon Linux 2023, glibc 2.34, x86_64) can load.
WHEEL_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_28_x86_64")
# Never run: local bundling always succeeds or raises. CDK requires an image all the same.
_NO_DOCKER = DockerImage.from_registry("public.ecr.aws/sam/build-python3.12")
# Only the library ships; the local emulator and the CLI stay on the developer's machine.
_LIBRARY_EXCLUDES = ("local", "cli.py", "__pycache__", "*.pyc")


@jsii.implements(ILocalBundling)
class _PipInstallLayer:
    """`pip install --platform ... --only-binary=:all:` of the runtime requirements into python/."""

    def __init__(self, requirements: Path):
        self.requirements = requirements

    def try_bundle(self, output_dir: str, *_options: Any, **_kw: Any) -> bool:
        platforms = [arg for p in WHEEL_PLATFORMS for arg in ("--platform", p)]
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-compile", "--only-binary=:all:", *platforms, "--implementation", "cp",
             "--python-version", RUNTIME.name.removeprefix("python"),
             "--target", str(Path(output_dir) / "python"), "-r", str(self.requirements)],
            check=True,
        )  # fmt: skip
        return True


@jsii.implements(ILocalBundling)
class _CopyHandler:
    """A handler folder plus the library package, as plain files."""

    def __init__(self, handler_dir: Path):
        self.handler_dir = handler_dir

    def try_bundle(self, output_dir: str, *_options: Any, **_kw: Any) -> bool:
        out = Path(output_dir)
        ignore = shutil.ignore_patterns(*_LIBRARY_EXCLUDES)
        shutil.copytree(self.handler_dir, out, dirs_exist_ok=True, ignore=ignore)
        shutil.copytree(ROOT / "hybridsync", out / "hybridsync", dirs_exist_ok=True, ignore=ignore)
        return True


def dependency_layer(scope: Construct, id: str) -> lambda_.LayerVersion:
    requirements = ROOT / "requirements-runtime.txt"
    return lambda_.LayerVersion(
        scope,
        id,
        # The asset's source is the requirements file alone, so the bundle is reused until it changes.
        code=lambda_.Code.from_asset(
            str(ROOT),
            exclude=["*", f"!{requirements.name}"],
            bundling=BundlingOptions(image=_NO_DOCKER, local=_PipInstallLayer(requirements)),
        ),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="hybridsync runtime dependencies (powertools, sqlalchemy, psycopg, alembic)",
    )


class HandlerFunction(Construct):
    """One pipeline function: `lambdas/<name>/handler.py:handler` + the library, on the shared layer.

    Every handler gets the same runtime, architecture, log retention, Powertools settings and
    tracing switch; callers add only what differs (environment, VPC, timeout, memory).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        layer: lambda_.ILayerVersion,
        environment: dict[str, str] | None = None,
        timeout: Duration | None = None,
        memory_size: int = 512,
        tracing: bool = False,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        vpc: ec2.IVpc | None = None,
        security_groups: list[ec2.ISecurityGroup] | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        handler_dir = ROOT / "lambdas" / name
        if not (handler_dir / "handler.py").is_file():
            raise FileNotFoundError(f"no handler at {handler_dir / 'handler.py'}")
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="handler.handler",
            code=lambda_.Code.from_asset(
                str(handler_dir),
                # Output hash: the bundle also holds the library, which lives outside handler_dir.
                asset_hash_type=AssetHashType.OUTPUT,
                bundling=BundlingOptions(image=_NO_DOCKER, local=_CopyHandler(handler_dir)),
            ),
            layers=[layer],
            environment={
                "POWERTOOLS_SERVICE_NAME": f"hybridsync-{name}",
                "POWERTOOLS_METRICS_NAMESPACE": "hybridsync",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **(environment or {}),
            },
            timeout=timeout or Duration.seconds(60),
            memory_size=memory_size,
            tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED,
            log_group=self.log_group,
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED) if vpc else None,
            security_groups=security_groups,
            dead_letter_queue=dead_letter_queue,
            reserved_concurrent_executions=reserved_concurrency or None,
        )
