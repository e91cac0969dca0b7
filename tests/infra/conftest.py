"""Each stack's synthesized template, from the session's one `cdk synth`."""

import pytest

from tests.conftest import load_template


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
