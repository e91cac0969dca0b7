"""Each stack's synthesized template, from the session's one `cdk synth`."""

import pytest

from tests.conftest import load_template
from tests.infra.test_database_access import ADMIN_SECRET, KEY, NETWORK, synthesize

TOPIC = "arn:aws:sns:eu-west-1:123456789012:pager"


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
def variants(bundle):
    """Every variant the docs offer, synthesized in process (cdk-nag errors and rule findings fail
    the synth), once per session: the deploy truth's tests and `hybridsync check`'s share them."""
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
    }
