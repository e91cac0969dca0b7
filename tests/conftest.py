"""Session-scoped services: one embedded DynamoDB + PostgreSQL stack, one `cdk synth` per session."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from filelock import FileLock

from hybridsync import local
from hybridsync.runtime import db

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Every DynamoDB Local the suite starts (the session's, each app's and benchmark's, in any
    subprocess) compiles with C1 only: it lives seconds to minutes, and C2's compiling cost more CPU
    than its faster code saved (start 4.4 -> 2.7 CPU-s; 4,500 requests 10.6 -> 6.1 CPU-s, at the
    same wall time; a suite bound by its 2 cores). `hybridsync up` keeps the JVM's default."""
    os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The folder a test lives in is its marker: `-m unit` runs without any service, and with every
    socket refused (pytest-socket), so a unit test that reaches for the network fails."""
    for item in items:
        kind = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if kind in ("unit", "integration", "infra", "reliability", "fidelity", "fuzz"):
            item.add_marker(kind)
        if kind == "unit":
            item.add_marker(pytest.mark.disable_socket)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local.LocalStack]:
    """DynamoDB Local, moto server and embedded PostgreSQL (or DYNAMODB_ENDPOINT / AWS_ENDPOINT /
    DATABASE_URL), the shop's tables and schema."""
    with local.start(tmp_path_factory.mktemp("state"), prefix="test") as running:
        yield running


@pytest.fixture(scope="session")
def hybridsync_servers(stack: local.LocalStack) -> local.LocalStack:
    """The contract suite's servers are the session's (its fixtures come from hybridsync's plugin)."""
    return stack


@pytest.fixture(scope="session")
def dynamodb(stack: local.LocalStack) -> Any:
    return stack.client("dynamodb")


@pytest.fixture(scope="session")
def engine(stack: local.LocalStack) -> Iterator[sa.Engine]:
    engine = db.create_engine(stack.database_url)
    yield engine
    engine.dispose()


def synth(out: Path, *context: str) -> Path:
    """The real CLI (`npx cdk synth`, pinned in package.json) with no AWS credentials at all;
    `context`: `key=value` pairs passed as `-c`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env |= {"AWS_EC2_METADATA_DISABLED": "true", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    flags = [arg for pair in context for arg in ("-c", pair)]
    result = subprocess.run(
        [str(cdk), "synth", "--quiet", "--ignore-errors", "--no-notices", *flags, "--output", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout}\n{result.stderr}"
    return out


@pytest.fixture(scope="session")
def cloud_assembly(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One `cdk synth` per run: under pytest-xdist the first worker synthesizes into the run's
    shared temporary folder and the others read it (no test writes to it)."""
    if worker_id == "master":  # not distributed
        return synth(tmp_path_factory.mktemp("cdk.out"))
    shared = tmp_path_factory.getbasetemp().parent / "cdk.out"
    with FileLock(f"{shared}.lock"):
        if not (shared / "manifest.json").is_file():
            synth(shared)
    return shared


@pytest.fixture(scope="session")
def kinesis_assembly(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The app synthesized with every streamed table on Kinesis Data Streams for DynamoDB
    (`-c change_source=kinesis`), once per run as `cloud_assembly` is."""
    if worker_id == "master":
        return synth(tmp_path_factory.mktemp("kinesis.out"), "change_source=kinesis")
    shared = tmp_path_factory.getbasetemp().parent / "kinesis.out"
    with FileLock(f"{shared}.lock"):
        if not (shared / "manifest.json").is_file():
            synth(shared, "change_source=kinesis")
    return shared


def load_template(assembly: Path, stack_suffix: str) -> dict[str, Any]:
    (path,) = assembly.glob(f"*-{stack_suffix}.template.json")
    return json.loads(path.read_text())
