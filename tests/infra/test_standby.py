"""A standby stack (cdk/standby.py): in a replica Region that `hybridsync standby` prepared, the
consumers deployed idle on that Region's replica streams, logging in with replicas of home's role
secrets; what cannot stand by is refused at synth in one sentence."""

from __future__ import annotations

import copy
import json

import pytest
from aws_cdk import App

from hybridsync.cdk import build
from hybridsync.local.template import Assembly
from hybridsync.sync.deployed_failover import WRITER_OUTPUTS
from shop.model import MODEL
from tests.infra.conftest import AURORA_STANDBY, STANDBY, STREAM
from tests.infra.test_database_access import ADMIN_SECRET, NETWORK, ROOT, of_type

pytestmark = pytest.mark.infra
REGION = "us-west-2"


def functions(template: dict) -> dict[str, dict]:
    """Construct id -> environment of each function of the stack."""
    found = of_type(template, "AWS::Lambda::Function")
    return {k.split("Function")[0]: f["Properties"].get("Environment", {}).get("Variables", {})
            for k, f in found.items()}  # fmt: skip


def test_the_standby_waits_on_its_regions_replica_with_every_consumer_disabled(variants):
    standby = variants["standby"][f"standby-{REGION}"]
    assert standby["Metadata"] == {"hybridsync:standby": REGION}
    mappings = of_type(standby, "AWS::Lambda::EventSourceMapping")
    assert sorted(k.split("Live")[0] for k in mappings) == ["Aggregate", "WriteBack"]
    for mapping in mappings.values():
        assert mapping["Properties"]["EventSourceArn"] == STREAM  # its own Region's replica stream
        assert mapping["Properties"]["Enabled"] is False
    (schedule,) = of_type(standby, "AWS::Events::Rule").values()
    assert schedule["Properties"]["State"] == "DISABLED"  # the outbox drain: home's until a failover
    found = functions(standby)
    assert set(found) == {"WriteBack", "Aggregate", "SqlSync", "Operations", "Migrate"}  # no API, no Users
    assert found["Operations"]["PIPELINE_ENABLED"] == "false"  # a rebuild leaves the aggregation off
    assert not of_type(standby, "AWS::CloudFormation::CustomResource")  # no Users step, no schema step
    # the tables by name, the roles by their replica secrets in the Region
    assert found["WriteBack"]["TABLE_MAIN"] == STANDBY[REGION]["tables"]["main"]["name"]
    for function, role in (("WriteBack", "writer"), ("Migrate", "migrator")):
        assert found[function]["DB_SECRET_ARN"] == STANDBY[REGION]["secrets"][role]


def test_home_replicates_each_roles_secret_to_the_standby_and_says_its_arn(variants):
    database = variants["standby"]["database"]
    secrets = of_type(database, "AWS::SecretsManager::Secret")
    replicated = [s["Properties"].get("ReplicaRegions") for s in secrets.values()]
    assert replicated == [[{"Region": REGION}]] * 3  # reader, writer, migrator (the admin's is yours)
    assert {"ReaderSecretArn", "WriterSecretArn", "MigratorSecretArn"} <= set(database["Outputs"])
    no_standby = of_type(variants["existing"]["database"], "AWS::SecretsManager::Secret").values()
    assert all("ReplicaRegions" not in s["Properties"] for s in no_standby)


def test_an_aurora_home_is_the_primary_of_a_global_database_whose_secondary_the_standby_reaches(variants):
    """The app's Aurora cluster: home's joins an Aurora Global Database as its primary, the standby
    Region's database stack adds a secondary (no login of its own: the primary's replicate) behind a
    proxy the standby's functions log in through with IAM, the roles' passwords read from their
    secrets' replicas there."""
    stacks = variants["standby_active"]
    (joined,) = of_type(stacks["database"], "AWS::RDS::GlobalCluster").values()
    (primary,) = of_type(stacks["database"], "AWS::RDS::DBCluster")
    assert primary in json.dumps(joined["Properties"]["SourceDBClusterIdentifier"])  # its ARN
    assert joined["Properties"]["DeletionProtection"] is True
    secrets = of_type(stacks["database"], "AWS::SecretsManager::Secret").values()
    assert (
        sum(s["Properties"].get("ReplicaRegions") == [{"Region": REGION}] for s in secrets) == 3
    )  # not the admin's
    standby_database = stacks[f"standby-{REGION}-database"]
    assert standby_database["Metadata"] == {"hybridsync:standby": REGION}
    (secondary,) = of_type(standby_database, "AWS::RDS::DBCluster").values()
    assert (
        secondary["Properties"]["GlobalClusterIdentifier"] == joined["Properties"]["GlobalClusterIdentifier"]
    )
    assert "MasterUsername" not in secondary["Properties"] and secondary["Properties"]["StorageEncrypted"]
    assert "alias/aws/rds" in json.dumps(secondary["Properties"]["KmsKeyId"])  # its Region's key, named
    # what `hybridsync failover --deployed` reads (sync/deployed_failover.py Writer.of)
    outputs = standby_database["Outputs"]
    assert outputs["GlobalClusterId"]["Value"] == joined["Properties"]["GlobalClusterIdentifier"]
    assert set(WRITER_OUTPUTS) <= set(outputs)
    (proxy,) = of_type(standby_database, "AWS::RDS::DBProxy").values()
    assert [a["SecretArn"] for a in proxy["Properties"]["Auth"]] == [
        AURORA_STANDBY["secrets"][r] for r in ("reader", "writer", "migrator")
    ]
    assert {a["IAMAuth"] for a in proxy["Properties"]["Auth"]} == {"REQUIRED"}
    (target,) = of_type(standby_database, "AWS::RDS::DBProxyTargetGroup").values()
    assert target["Properties"]["DBClusterIdentifiers"] == [{"Ref": "Cluster"}]
    write_back = functions(stacks[f"standby-{REGION}"])["WriteBack"]
    assert write_back["DB_IAM_AUTH"] == "true" and write_back["DB_USER"] == "hybridsync_writer"
    assert "standby-us-west-2-database" in json.dumps(write_back["DB_HOST"])  # its Region's proxy
    assert "DB_SECRET_ARN" not in write_back
    assert "ProxyReadOnly" in json.dumps(write_back["DB_READER_HOST"])  # the failover's first login
    # its alarms once it is the writer: the proxy, and the secondary's capacity
    alarms = of_type(stacks[f"standby-{REGION}-monitoring"], "AWS::CloudWatch::Alarm")
    for alarm in ("ProxyAvailability", "ProxyFailedAuth", "AuroraCapacity"):
        assert any(k.startswith(alarm) for k in alarms), alarm
    for name in ("default", "existing", "standby"):  # no standby, or your own database: no global one
        assert not of_type(variants[name]["database"], "AWS::RDS::GlobalCluster"), name


def test_the_local_app_runs_no_standby(variants, tmp_path):
    """Locally a failover runs home's own functions on the new home's replica (local/failover.py)."""
    manifest = {"artifacts": {}}
    for name, template in variants["standby"].items():
        (tmp_path / f"{name}.template.json").write_text(json.dumps(template))
        region = REGION if name.startswith("standby-") else "us-east-1"
        manifest["artifacts"][name] = {"type": "aws:cloudformation:stack", "environment": f"aws://unknown-account/{region}",
                                       "properties": {"templateFile": f"{name}.template.json"}}  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assembly = Assembly.load(tmp_path)
    assert sorted(assembly.templates) == ["api", "data", "database", "monitoring", "pipeline"]
    assert assembly.region == "us-east-1"


def _context(**changes: object) -> dict:
    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    pem = ROOT / "tests" / "infra" / "conftest.py"  # any file: refused before it is read
    existing = {"existing_db_secret_arn": ADMIN_SECRET, "db_root_certificates": str(pem), **NETWORK}
    return {**flags, **existing, "replica_regions": REGION, "home_region": "us-east-1",
            "standby": json.dumps(STANDBY), "aws:cdk:bundling-stacks": [], **changes}  # fmt: skip


def _without(path: str) -> str:
    entry = copy.deepcopy(STANDBY)
    *parents, last = path.split(".")
    node = entry[REGION]
    for part in parents:
        node = node[part]
    node.pop(last)
    return json.dumps(entry)


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        ({"standby": _without("vpc_id")}, "lacks vpc_id"),  # your own database: the network reaching it
        (
            {"existing_db_proxy": "true", "existing_db_instance_id": "pg"},
            "existing_db_proxy lives in home's VPC",
        ),
        ({"replica_regions": "eu-west-1"}, "us-west-2 holds no replica"),
        ({"standby": _without("tables.main")}, "lacks tables.main"),
        ({"standby": _without("secrets.writer")}, "lacks secrets.writer"),
        ({"standby": "[1]"}, "a JSON object of Regions"),
        ({"change_source": "kinesis"}, "feed the engine through Kinesis"),
        ({"alarm_topic_arn": "arn:aws:sns:us-east-1:123456789012:pager"}, "alarms would reach no one"),
    ],
)
def test_what_cannot_stand_by_is_refused_in_one_sentence(changes, refused):
    with pytest.raises(ValueError, match=refused):
        build(App(context={k: v for k, v in _context(**changes).items() if v is not None}))


def states(stacks: dict, stack: str) -> dict[str, object]:
    """What a deploy of `stack` renders: its mappings' Enabled, its drain's State, what its
    operations function's rebuilds leave the aggregation as, and its drain's alarm."""
    template = stacks[stack]
    mappings = of_type(template, "AWS::Lambda::EventSourceMapping")
    rendered: dict[str, object] = {
        "mappings": {k.split("Live")[0]: m["Properties"]["Enabled"] for k, m in mappings.items()},
        "drain": {r["Properties"]["State"] for r in of_type(template, "AWS::Events::Rule").values()
                  if "SqlSync" in json.dumps(r)},
        "rebuilds leave": functions(template)["Operations"]["PIPELINE_ENABLED"],
    }  # fmt: skip
    watching = stacks["monitoring" if stack == "pipeline" else f"{stack}-monitoring"]  # home's, or its own
    alarms = of_type(watching, "AWS::CloudWatch::Alarm")
    (outbox,) = [a["Properties"] for k, a in alarms.items() if k.startswith("OutboxAge")]
    rendered["drain alarm without data"] = outbox["TreatMissingData"]
    return rendered


def test_after_a_deployed_failover_a_deploy_keeps_home_fenced_and_the_standby_consuming(variants):
    """`hybridsync failover --deployed` marks the standby active in cdk.json: a deploy then must not
    enable home's mappings again (each change would be applied twice), nor alarm on its idle drain."""
    idle, active = variants["standby"], variants["standby_active"]
    on, off = {"WriteBack": True, "Aggregate": True}, {"WriteBack": False, "Aggregate": False}
    consuming = {
        "mappings": on,
        "drain": {"ENABLED"},
        "rebuilds leave": "true",
        "drain alarm without data": "breaching",
    }
    waiting = {"mappings": off, "drain": {"DISABLED"}, "rebuilds leave": "false",
               "drain alarm without data": "notBreaching"}  # fmt: skip
    assert states(idle, "pipeline") == consuming and states(idle, f"standby-{REGION}") == waiting
    assert states(active, "pipeline") == waiting and states(active, f"standby-{REGION}") == consuming


def test_the_standbys_alarms_wait_in_its_region_for_the_day_it_consumes(variants):
    """After a failover the new home's consumers page someone: their alarms are in the standby's
    Region (where their metrics are), on a topic of that Region's own."""
    monitoring = variants["standby"][f"standby-{REGION}-monitoring"]
    assert monitoring["Metadata"] == {"hybridsync:standby": REGION}
    alarms = of_type(monitoring, "AWS::CloudWatch::Alarm")
    for consumer in ("WriteBack", "Aggregate"):
        for alarm in ("IteratorAgeCritical", "Errors", "DeadLetters", "MainFailedBatches", "FreshnessP99"):
            assert any(k.startswith(f"{consumer}{alarm}") for k in alarms), f"{consumer}{alarm}"
    (topic,) = of_type(monitoring, "AWS::SNS::Topic")
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]


def test_between_the_failovers_steps_a_deploy_leaves_the_aggregation_off():
    """Marked active, not yet rebuilt (a rebuild that failed): a deploy starts the write-back and the
    drain, never the aggregation on aggregates its stream history would count again."""
    midway = {REGION: STANDBY[REGION] | {"active": True}}
    stacks = build(App(context=_context(standby=json.dumps(midway))))
    standby = stacks[f"standby-{REGION}"]
    assert (standby.enabled, standby.folding) == (True, False)  # type: ignore[attr-defined]
    assert (stacks["pipeline"].enabled, stacks["pipeline"].folding) == (False, False)  # type: ignore[attr-defined]


def test_one_region_consumes_at_a_time():
    both = copy.deepcopy(STANDBY)
    both[REGION]["active"] = True
    both["eu-west-1"] = {**both[REGION]}
    with pytest.raises(ValueError, match="are both active"):
        build(App(context=_context(standby=json.dumps(both), replica_regions="us-west-2,eu-west-1")))


def test_a_standby_refuses_a_consumed_table_without_a_replica_in_its_region(monkeypatch):
    """Per-table replicas: the chunks table replicated to the standby's Region, the main table (which
    the write-back and the aggregation read) not."""
    from hybridsync.cdk import standby

    def replicas(scope: object, table: object) -> tuple[str, ...]:
        return (REGION,) if table.name == "chunks" else ("eu-west-1",)  # type: ignore[attr-defined]

    monkeypatch.setattr(standby.context, "replicas", replicas)
    with pytest.raises(ValueError, match="main has no replica in us-west-2, and the standby's consumers"):
        standby.prepared(App(context=_context()), MODEL)


def test_the_local_app_synthesizes_without_the_standbys():
    """`hybridsync up` runs home's functions, consuming, whatever a deployed failover wrote."""
    from hybridsync.local.template import local_context

    active = {"us-west-2": {**STANDBY[REGION], "active": True}}
    context = local_context({"context": {"prefix": "Shop", "standby": active}})
    assert context["prefix"] == "Shop" and "standby" not in context


def test_cfn_lint_finds_nothing_in_the_standby_in_its_region(variants, tmp_path):
    """The standby deploys to us-west-2 (cfn-lint checks what that Region offers), its Aurora
    secondary too, and home's global database to us-east-1; checkov's run on the session's synth
    covers the same constructs (the functions, the bucket, the queue)."""
    import subprocess

    from tests.infra.test_security import CFN_LINT_IGNORED

    linted = [("standby", f"standby-{REGION}", REGION), ("standby_active", f"standby-{REGION}", REGION),
              ("standby_active", f"standby-{REGION}-database", REGION),
              ("standby_active", "database", "us-east-1")]  # fmt: skip
    for variant, stack, region in linted:
        path = tmp_path / f"{variant}-{stack}.template.json"
        path.write_text(json.dumps(variants[variant][stack]))
        run = subprocess.run(["cfn-lint", "--ignore-checks", ",".join(CFN_LINT_IGNORED), "--regions", region,
                              "--", str(path)], capture_output=True, text=True)  # fmt: skip
        assert run.returncode == 0, stack + run.stdout + run.stderr


def test_the_standbys_alarms_go_to_the_topic_its_entry_names():
    topic = "arn:aws:sns:us-west-2:123456789012:pager-west"
    named = {REGION: STANDBY[REGION] | {"alarm_topic_arn": topic}}
    stacks = build(
        App(context=_context(standby=json.dumps(named), alarm_topic_arn="arn:aws:sns:us-east-1:1:p"))
    )
    assert stacks[f"standby-{REGION}-monitoring"].topic.topic_arn == topic  # type: ignore[attr-defined]
    assert stacks["monitoring"].topic.topic_arn == "arn:aws:sns:us-east-1:1:p"  # type: ignore[attr-defined]
