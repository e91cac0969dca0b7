"""Production posture of the synthesized app: each function's database login (role, IAM through the
proxy, verify-full), rotation, an existing database inside its own VPC, two environments with no
name in common, a customer-managed key on every store, on-demand ceilings. Variants are synthesized
in process, without asset bundling (the session's `cdk synth` covers the assets)."""

import json
from collections.abc import Iterable
from pathlib import Path

import pytest
import sqlalchemy as sa
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from aws_cdk.cx_api import SynthesisMessageLevel

from hybridsync import truth
from hybridsync.cdk import build
from hybridsync.runtime import settings
from hybridsync.sql import roles
from tests.conftest import load_template

pytestmark = pytest.mark.infra
ROOT = Path(__file__).resolve().parents[2]
KEY = "arn:aws:kms:eu-west-1:123456789012:key/0b0b0b0b-1111-2222-3333-444444444444"
ADMIN_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:pg-admin-AbCdEf"
SUBNETS = ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]
GROUP = "sg-0123456789abcdef0"  # the existing database's
NETWORK = {"existing_db_vpc_id": "vpc-0123456789abcdef0", "existing_db_subnet_ids": ",".join(SUBNETS),
           "existing_db_security_group_id": GROUP}  # fmt: skip
PHYSICAL = {"TableName", "FunctionName", "QueueName", "TopicName", "BucketName", "DashboardName",
            "LogGroupName", "DBProxyName", "DBClusterIdentifier", "DBInstanceIdentifier", "RoleName",
            "AlarmName", "DisplayName", "SecretName", "ParameterName", "ScheduleName"}  # fmt: skip
NAMED_BY_NAME = {
    "AWS::ApiGatewayV2::Api",
    "AWS::Events::Rule",
    "AWS::SecretsManager::Secret",
    "AWS::SSM::Parameter",
}
EXPECTED_ROLES = {"Migrate": "migrator", "WriteBack": "writer", "Aggregate": "writer", "SqlSync": "writer",
                  "Operations": "writer", "Api": "reader", "Users": "admin"}  # fmt: skip


def synthesize(**context: str) -> dict[str, dict]:
    """The variant's templates; cdk-nag (an aspect of the build) and the deploy truth
    (hybridsync.truth) must find nothing in any."""
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = App(context={**flags, **context, "aws:cdk:bundling-stacks": []})
    stacks = build(app)
    templates = {
        name: template for name, template in zip(stacks, synthesized(app, stacks.values()), strict=True)
    }
    findings = truth.check(truth.Templates({s.stack_name: templates[n] for n, s in stacks.items()}))  # type: ignore[attr-defined]
    assert findings == [], "\n".join(map(str, findings))
    return templates


def synthesized(app: App, stacks: Iterable[Stack]) -> list[dict]:
    """Each stack's template from one synth of the app, none with an error annotation (cdk-nag's, the
    stacks' own) nor a cycle between its resources (`Template` checks). Not `Annotations.from_stack`:
    it synthesizes the whole app again, per stack."""
    assembly = app.synth()
    templates = []
    for stack in stacks:
        artifact = assembly.get_stack_artifact(stack.artifact_id)
        errors = [
            f"{m.id}: {m.entry.data}" for m in artifact.messages if m.level == SynthesisMessageLevel.ERROR
        ]
        assert errors == [], f"{stack.stack_name}:\n" + "\n".join(errors)
        templates.append(Template.from_json(artifact.template).to_json())  # it checks for cycles
    return templates


def of_type(template: dict, kind: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def functions(pipeline: dict) -> dict[str, dict]:
    """Construct id -> environment of each engine function (not CDK's framework ones)."""
    found = {}
    for logical, function in of_type(pipeline, "AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "HYBRIDSYNC_MODEL" in variables:
            found[logical.split("Function")[0]] = variables
    return found


def statements(template: dict, owner: str) -> list[dict]:
    return [s for k, p in of_type(template, "AWS::IAM::Policy").items() if k.startswith(owner)
            for s in p["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip


@pytest.fixture(scope="module")
def blue():
    """The shop as environment "Blue", with a customer-managed key and on-demand ceilings."""
    return synthesize(prefix="Blue", kms_key_arn=KEY, max_read_request_units="40000",
                      max_write_request_units="main=2000,main/OrdersByStatus=500")  # fmt: skip


@pytest.fixture(scope="module")
def default(cloud_assembly):
    """The session's `cdk synth`: the default prefix, `HybridSync`."""
    return {
        name: load_template(cloud_assembly, name)
        for name in ("data", "database", "pipeline", "api", "monitoring")
    }


def test_each_function_logs_in_as_its_role_with_iam_through_the_proxy(database, pipeline):
    found = functions(pipeline)
    assert {name: env.get("DB_ROLE") for name, env in found.items() if "DB_ROLE" in env} == EXPECTED_ROLES
    proxies = of_type(database, "AWS::RDS::DBProxy")
    ((proxy_id, proxy),) = proxies.items()
    assert proxy["Properties"]["RequireTLS"] is True
    assert {a["IAMAuth"] for a in proxy["Properties"]["Auth"]} == {"REQUIRED"}  # no password login at all
    assert len(proxy["Properties"]["Auth"]) == 4  # the admin and the three roles
    for name, role in EXPECTED_ROLES.items():
        env = found[name]
        user = "hybridsync" if role == "admin" else roles.user(role)
        assert env["DB_IAM_AUTH"] == "true" and env["DB_USER"] == user and env["DB_PORT"] == "5432"
        assert "DB_SECRET_ARN" not in env and "DATABASE_URL" not in env and "DB_SSLROOTCERT" not in env
        connects = [s for s in statements(pipeline, name) if s["Action"] == "rds-db:connect"]
        (grant,) = connects  # that one login on that one proxy
        assert f"/{user}" in json.dumps(grant["Resource"]) and proxy_id in json.dumps(grant["Resource"])
    others = [n for n, env in found.items() if "DB_ROLE" not in env]  # no database: no network, no login
    assert others and all("DB_HOST" not in found[n] for n in others)


def test_no_function_reads_the_admin_secret_and_only_the_users_step_reads_the_roles(database, pipeline):
    admin = [k for k in of_type(database, "AWS::SecretsManager::SecretTargetAttachment")
             if k.startswith("ClusterSecret")]  # fmt: skip
    said = json.dumps([statements(pipeline, name) for name in functions(pipeline)])
    assert admin and not any(a in said for a in admin)
    reading = "secretsmanager:GetSecretValue"
    readers = {name: [r for s in statements(pipeline, name) if reading in s["Action"]
                      for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])]
               for name in functions(pipeline)}  # fmt: skip
    assert {name for name, read in readers.items() if read} == {"Users", "Api"}
    assert len(readers["Users"]) == 3  # the roles': it sets each login's password to its secret's
    (cursor_key,) = readers["Api"]  # the API: its page cursors' signing key, no password
    assert "PageCursorKey" in json.dumps(cursor_key)


def test_every_connection_verifies_the_server(monkeypatch):
    """verify-full on every path a function has (IAM through the proxy, a role's password), against
    certifi's roots, which hold the Amazon Root CAs RDS Proxy's certificates chain to."""
    import certifi

    for variable in ("DATABASE_URL", "DB_SSLROOTCERT", "DB_SECRET_ARN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("DB_IAM_AUTH", "true")
    for key, value in {"DB_USER": "hybridsync_reader", "DB_HOST": "proxy.example", "DB_PORT": "5432",
                       "DB_NAME": "hybridsync"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    where = settings.database()
    query = sa.make_url(where.url("token")).query
    assert query == {"sslmode": "verify-full", "sslrootcert": certifi.where()}
    assert "Amazon Root CA 1" in Path(certifi.where()).read_text()


def test_every_password_is_rotated(database, pipeline):
    """The admin's with its cluster; each role's in the pipeline stack, after the Users step makes
    its login (a schedule rotates at once when created)."""
    secrets = of_type(database, "AWS::SecretsManager::Secret")
    schedules = of_type(database, "AWS::SecretsManager::RotationSchedule")
    roles_ = of_type(pipeline, "AWS::SecretsManager::RotationSchedule")
    assert len(secrets) == len(schedules) + len(roles_) == 4 and len(roles_) == len(roles.ROLES)
    assert all(r["DependsOn"] == ["DatabaseUsers"] for r in roles_.values())
    for schedule in [*schedules.values(), *roles_.values()]:
        properties = schedule["Properties"]
        assert properties["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
        assert properties["HostedRotationLambda"]["RotationType"] == "PostgreSQLSingleUser"
        assert properties["HostedRotationLambda"]["VpcSubnetIds"]  # it reaches the database privately


def test_two_prefixes_share_no_name(blue, default):
    """Every name the stacks give an account-wide resource, and the metrics' namespace and service
    the alarms read, differ between two environments."""

    def names(stacks: dict[str, dict]) -> set[str]:
        found = set()
        for template in stacks.values():
            for resource in template["Resources"].values():
                properties = resource.get("Properties", {})
                for key, value in properties.items():
                    named = key in PHYSICAL or (key == "Name" and resource["Type"] in NAMED_BY_NAME)
                    if isinstance(value, str) and named:
                        found.add(value)
                variables = properties.get("Environment", {}).get("Variables", {})
                found |= {v for k, v in variables.items() if k.startswith(("POWERTOOLS_", "TIMESERIES_"))
                          and k != "POWERTOOLS_TRACE_DISABLED" and k != "POWERTOOLS_LOG_LEVEL"}  # fmt: skip
                if resource["Type"] == "AWS::CloudWatch::Alarm":
                    namespace = properties.get("Namespace", "AWS/")
                    if not namespace.startswith("AWS/"):  # ours: the namespace and the service
                        found |= {namespace, *(d["Value"] for d in properties["Dimensions"])}
        return found

    assert names(blue) & names(default) == set()
    assert "blue" in names(blue) and "hybridsync-api" in names(default)  # the namespace, the API's name
    alarms = [a["Properties"] for a in of_type(blue["monitoring"], "AWS::CloudWatch::Alarm").values()]
    ours = [a for a in alarms if a.get("Namespace") == "blue"]
    assert ours and all(d["Value"].startswith("blue-") for a in ours for d in a["Dimensions"])


def test_the_customer_key_encrypts_every_store(blue):
    """The alarm topic has a key of its own, which CloudWatch may use (test_rules)."""
    tables = of_type(blue["data"], "AWS::DynamoDB::GlobalTable").values()
    assert tables and all(t["Properties"]["SSESpecification"]["SSEType"] == "KMS" for t in tables)
    assert all(r["SSESpecification"]["KMSMasterKeyId"] == KEY
               for t in tables for r in t["Properties"]["Replicas"])  # fmt: skip
    for stack, kind, path in (("pipeline", "AWS::SQS::Queue", ("KmsMasterKeyId",)),
                              ("database", "AWS::RDS::DBCluster", ("KmsKeyId",)),
                              ("database", "AWS::SecretsManager::Secret", ("KmsKeyId",))):  # fmt: skip
        resources = [r["Properties"] for r in of_type(blue[stack], kind).values()]
        assert resources and all(KEY in json.dumps(r[path[0]]) for r in resources), kind
    for stack in ("data", "pipeline"):
        for bucket in of_type(blue[stack], "AWS::S3::Bucket").values():
            (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": KEY}


def test_on_demand_ceilings_per_table_and_index(blue):
    tables = {t["Properties"]["Replicas"][0].get("GlobalSecondaryIndexes") and k: t["Properties"]
              for k, t in of_type(blue["data"], "AWS::DynamoDB::GlobalTable").items()}  # fmt: skip
    main = next(p for p in tables.values() if any(i["IndexName"] == "OrdersByStatus"
                                                   for i in p.get("GlobalSecondaryIndexes", [])))  # fmt: skip
    assert main["WriteOnDemandThroughputSettings"] == {"MaxWriteRequestUnits": 2000}
    assert main["Replicas"][0]["ReadOnDemandThroughputSettings"] == {"MaxReadRequestUnits": 40000}
    indexes = {i["IndexName"]: i for i in main["GlobalSecondaryIndexes"]}
    assert indexes["OrdersByStatus"]["WriteOnDemandThroughputSettings"] == {"MaxWriteRequestUnits": 500}
    assert indexes["OpenOrders"]["WriteOnDemandThroughputSettings"] == {"MaxWriteRequestUnits": 2000}


def test_an_existing_database_is_reached_inside_its_own_vpc_behind_a_proxy(tmp_path):
    bundle = tmp_path / "global-bundle.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    stacks = synthesize(existing_db_secret_arn=ADMIN_SECRET, existing_db_proxy="true",
                        existing_db_instance_id="legacy-pg", db_root_certificates=str(bundle),
                        **NETWORK)  # fmt: skip
    database, pipeline = stacks["database"], stacks["pipeline"]
    for absent in ("AWS::RDS::DBCluster", "AWS::EC2::VPC"):
        assert not of_type(database, absent)
    (proxy,) = of_type(database, "AWS::RDS::DBProxy").values()
    assert proxy["Properties"]["VpcSubnetIds"] == SUBNETS
    assert {a["IAMAuth"] for a in proxy["Properties"]["Auth"]} == {"REQUIRED"}
    (target,) = of_type(database, "AWS::RDS::DBProxyTargetGroup").values()
    assert target["Properties"]["DBInstanceIdentifiers"] == ["legacy-pg"]
    ingress = [r["Properties"] for r in of_type(database, "AWS::EC2::SecurityGroupIngress").values()]
    into_database = [i for i in ingress if i["GroupId"] == GROUP]
    assert {i["FromPort"] for i in into_database} == {5432}
    assert len(into_database) == 5  # the functions, the proxy, the three rotations
    endpoints = of_type(database, "AWS::EC2::VPCEndpoint").values()
    assert {e["Properties"]["VpcEndpointType"] for e in endpoints} == {"Interface"}
    found = functions(pipeline)
    for name, role in EXPECTED_ROLES.items():
        function = pipeline["Resources"][next(k for k in of_type(pipeline, "AWS::Lambda::Function")
                                              if k.startswith(f"{name}Function"))]["Properties"]  # fmt: skip
        assert function["VpcConfig"]["SubnetIds"] == SUBNETS, name
        if role == "admin":  # the logins' maker: the given secret, straight to the database
            assert found[name]["DB_SECRET_ARN"] == ADMIN_SECRET and "DB_HOST" not in found[name]
        else:
            assert found[name]["DB_IAM_AUTH"] == "true" and found[name]["DB_NAME"] == "postgres"
    assert not of_type(database, "AWS::SecretsManager::RotationSchedule")  # the admin's is yours
    assert len(of_type(pipeline, "AWS::SecretsManager::RotationSchedule")) == 3  # the roles', after Users


def test_an_existing_database_without_its_network_a_missing_trust_store_or_an_unknown_index_is_refused():
    with pytest.raises(ValueError, match="existing_db_vpc_id"):
        synthesize(existing_db_secret_arn=ADMIN_SECRET)
    with pytest.raises(ValueError, match="existing_db_instance_id"):
        synthesize(existing_db_secret_arn=ADMIN_SECRET, existing_db_proxy="true", **NETWORK)
    with pytest.raises(ValueError, match="no PEM bundle there"):
        synthesize(db_root_certificates="shop/rds-global-bundle.pem")
    with pytest.raises(ValueError, match="the model has no table or index main/Typo"):
        synthesize(max_read_request_units="main=10,main/Typo=5")
