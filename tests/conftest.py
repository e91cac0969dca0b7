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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The folder a test lives in is its marker: `-m unit` runs without any service, and with every
    socket refused (pytest-socket), so a unit test that reaches for the network fails."""
    for item in items:
        kind = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if kind in ("unit", "integration", "infra", "reliability", "fidelity", "fuzz"):
            item.add_marker(kind)
        if kind == "unit":
            item.add_marker(pytest.mark.disable_socket)


# The modules whose tests share a set-up too slow to build twice: a module-scoped fixture (an app
# started, the tutorial run, an in-process synth) or the session's `variants` (nine synths in
# process, built by each worker that needs them). Under `--dist loadgroup` (scripts/test) each
# group runs on one worker, so its set-up is built once, not once per worker the tests were spread
# over. (xdist's own xdist_group marks do not group under pytest 9: they rename `item._nodeid`,
# which pytest 9 no longer reads.)
SHARED_SETUP = {
    **{f"tests/infra/{name}.py": f"tests/infra/{name}.py"
       for name in ("test_database_access", "test_kinesis_source", "test_monitoring", "test_template")},
    "tests/infra/test_rules.py": "variants",
    "tests/infra/test_check.py": "variants",
    **{f"tests/integration/{name}.py": f"tests/integration/{name}.py"
       for name in ("test_adopt_live", "test_aggregate", "test_alarms_live", "test_any_writer",
                    "test_contract", "test_contract_minimal", "test_doctor", "test_kinesis_source",
                    "test_limits_agree", "test_local_app", "test_rebuild", "test_reviews", "test_tables",
                    "test_up_live", "test_write_back")},
    "tests/reliability/test_new_project.py": "tests/reliability/test_new_project.py",
    "tests/reliability/test_chaos.py": "tests/reliability/test_chaos.py",
}  # fmt: skip


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` as SHARED_SETUP groups: a group's tests on one worker, any other test
    wherever a worker is free (as `load` does)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SHARED_SETUP.get(nodeid.split("::")[0], nodeid)

    return SharedSetupScheduling(config, log)


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
