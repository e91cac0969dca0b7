"""`hybridsync doctor --deployed` reads the DNS attributes of the team's own VPC (`-c
existing_db_vpc_id=`): interface endpoints with private DNS answer only where `enableDnsSupport` and
`enableDnsHostnames` are both true (EC2 API, CreateVpcEndpoint), and synth cannot read an existing
VPC. moto stands in for EC2 (a new VPC: DNS support on, DNS hostnames off)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from hybridsync import truth
from hybridsync.truth import doctor as engine

REGION = "us-east-1"


def app(vpc_id: str, private_dns: bool = True) -> engine.App:
    endpoint = {"Type": "AWS::EC2::VPCEndpoint", "Properties": {
        "VpcId": vpc_id, "VpcEndpointType": "Interface", "PrivateDnsEnabled": private_dns}}  # fmt: skip
    made = {
        "Type": "AWS::EC2::VPCEndpoint",
        "Properties": {"VpcId": {"Ref": "Vpc"}, "PrivateDnsEnabled": True},
    }
    return engine.App(truth.Templates({"Shop-database": {"Resources": {"Secrets": endpoint, "Ours": made}}}))


def target() -> engine.Deployed:
    deployed = engine.Deployed.__new__(engine.Deployed)  # no stacks to read: only its EC2 client is asked
    deployed.client = lambda service, **_: boto3.client(service, region_name=REGION)
    return deployed


@pytest.fixture
def ec2():
    """moto's EC2, neither reset nor wiped on the way in or out: under xdist this worker may hold the
    session's moto server, in this process, whose buckets the same backends keep (test_doctor.py)."""
    mocked = mock_aws()
    mocked.start(reset=False)
    made: list[str] = []
    client = boto3.client("ec2", region_name=REGION)
    client.made = made  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        for vpc in made:
            client.delete_vpc(VpcId=vpc)
        mocked.stop(remove_data=False)


def test_a_team_vpc_without_dns_hostnames_fails_naming_the_attribute_and_passes_once_set(ec2):
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.made.append(vpc)
    assert app(vpc).private_dns_vpcs() == [vpc]  # the stacks' own VPC (a reference) is synth's to judge
    (check,) = engine.vpcs(app(vpc), target())
    assert not check.ok and check.subject == vpc
    assert check.message.startswith("enableDnsHostnames off") and "modify-vpc-attribute" in check.fix
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    (check,) = engine.vpcs(app(vpc), target())
    assert check.ok, check


def test_a_vpc_doctor_cannot_read_is_a_failure_not_a_traceback(ec2):
    (check,) = engine.vpcs(app("vpc-0123456789abcdef0"), target())
    assert not check.ok and "cannot read its DNS attributes" in check.message


def test_no_private_dns_no_check():
    assert app("vpc-0123456789abcdef0", private_dns=False).private_dns_vpcs() == []
