"""Each stack's synthesized template, from the session's one `cdk synth`."""

import json

import pytest
from filelock import FileLock

from tests.conftest import load_template
from tests.infra.test_database_access import ADMIN_SECRET, KEY, NETWORK, synthesize

TOPIC = "arn:aws:sns:eu-west-1:123456789012:pager"
STREAM = (
    "arn:aws:dynamodb:us-west-2:123456789012:table/HybridSync-data-MainTable-1A2B/stream/"
    "2026-11-29T00:00:00.000"
)
# what `hybridsync standby us-west-2` writes to cdk.context.json (tests/integration/test_standby.py)
STANDBY = {
    "us-west-2": {
        "tables": {"main": {"name": "HybridSync-data-MainTable-1A2B", "stream_arn": STREAM},
                   "chunks": {"name": "HybridSync-data-ChunksTable-3C4D"}},
        "secrets": {role: f"arn:aws:secretsmanager:us-west-2:123456789012:secret:{role}-AbCdEf"
                    for role in ("reader", "writer", "migrator")},
        "vpc_id": "vpc-0fedcba9876543210",
        "subnet_ids": ["subnet-0fedcba9876543211", "subnet-0fedcba9876543212"],
        "bodies_bucket": "hybridsync-data-bodiesbucket-1a2b",
    }
}  # fmt: skip

# with the app's Aurora cluster the standby makes its own network (`hybridsync standby` takes none)
AURORA_STANDBY = {k: v for k, v in STANDBY["us-west-2"].items() if k not in ("vpc_id", "subnet_ids")}


@pytest.fixture(scope="module")
def data(cloud_assembly):
    return load_template(cloud_assembly, "data")


@pytest.fixture(scope="module")
def database(cloud_assembly):
    return load_template(cloud_assembly, "database")


@pytest.fixture(scope="module")
def pipeline(cloud_assembly):
    return load_template(cloud_assembly, "pipeline")


@pytest.fixture(scope="module")
def monitoring(cloud_assembly):
    return load_template(cloud_assembly, "monitoring")


@pytest.fixture(scope="session")
def bundle(tmp_path_factory):
    """A CA bundle of the project's (the RDS one, as a team downloads it), beside nothing in a package."""
    path = tmp_path_factory.mktemp("trust") / "global-bundle.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n")
    return str(path)


@pytest.fixture(scope="session")
def variants(bundle, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, dict]:
    """Every variant the docs offer, synthesized in process (cdk-nag errors and rule findings fail
    the synth), once per run: the deploy truth's tests and `hybridsync check`'s share them. Under
    pytest-xdist the first worker that needs them synthesizes them and the others read its JSON (a
    minute of synths each otherwise, whenever a worker steals one of their tests)."""
    if worker_id == "master":  # not distributed
        return synthesize_variants(bundle)
    shared = tmp_path_factory.getbasetemp().parent / "variants.json"
    with FileLock(f"{shared}.lock"):
        if not shared.is_file():
            shared.write_text(json.dumps(synthesize_variants(bundle)))
    return json.loads(shared.read_text())


def synthesize_variants(bundle: str) -> dict[str, dict]:
    existing = {"existing_db_secret_arn": ADMIN_SECRET, "db_root_certificates": bundle, **NETWORK}
    return {
        "default": synthesize(),
        "paused": synthesize(pipeline_enabled="false"),
        "kms": synthesize(kms_key_arn=KEY, alarm_email="ops@example.com"),
        "topic": synthesize(alarm_topic_arn=TOPIC),
        "existing": synthesize(**existing),
        "existing_proxy": synthesize(
            **existing, existing_db_proxy="true", existing_db_instance_id="legacy-pg"
        ),
        "existing_routes": synthesize(**existing, existing_db_endpoints="false"),
        "economy": synthesize(freshness="economy"),
        "kinesis": synthesize(change_source="kinesis"),
        "replicas": synthesize(replica_regions="us-west-2,eu-west-1", home_region="us-east-1"),
        "replicas_kinesis": synthesize(
            replica_regions="us-west-2", home_region="eu-central-1", change_source="kinesis"
        ),
        "standby": synthesize(
            **existing, replica_regions="us-west-2", home_region="us-east-1", standby=json.dumps(STANDBY)
        ),
        "standby_active": synthesize(
            replica_regions="us-west-2",
            home_region="us-east-1",
            standby=json.dumps({"us-west-2": AURORA_STANDBY | {"active": True, "rebuilt": True}}),
        ),  # the app's Aurora, after `hybridsync failover --to us-west-2 --deployed`
    }
