"""`cdk synth -c model=...` renders another model: the engine's minimal one (a table `records`
keyed `pk`/`sk`, no GSI, its own reserved names), while this repository's routes still ship; with
the pipeline paused and the alarms sent to a topic of the team's."""

import json

from tests.conftest import load_template, synth
from tests.minimal_model.model import MODEL


def test_synth_of_the_minimal_model(tmp_path):
    topic = "arn:aws:sns:us-east-1:123456789012:pager"
    out = synth(tmp_path / "cdk.out", "model=tests.minimal_model.model:MODEL", "pipeline_enabled=false",
                f"alarm_topic_arn={topic}", "alarm_email=oncall@example.com")  # fmt: skip
    data, pipeline = load_template(out, "data"), load_template(out, "pipeline")
    (table,) = [
        r["Properties"] for r in data["Resources"].values() if r["Type"] == "AWS::DynamoDB::GlobalTable"
    ]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["pk", "sk"]
    assert not table.get("GlobalSecondaryIndexes")
    functions = [
        r["Properties"] for r in pipeline["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
    ]
    variables = [f["Environment"]["Variables"] for f in functions if "Environment" in f]
    assert {v.get("HYBRIDSYNC_MODEL") for v in variables} - {None} == {"tests.minimal_model.model:MODEL"}
    assert all("TABLE_RECORDS" in v and "TABLE_MAIN" not in v for v in variables if "HYBRIDSYNC_MODEL" in v)
    patterns = [json.loads(f["Pattern"])
                for r in pipeline["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"
                for f in r["Properties"]["FilterCriteria"]["Filters"]]  # fmt: skip
    said = json.dumps(patterns)
    assert MODEL.names.origin in said and '"Origin"' not in said  # the model's reserved names
    # records are admitted by the entities' key prefixes, tagged or not (hybridsync.model.placing)
    assert '{"prefix": "note:"}' in said and '{"prefix": "retraction:"}' in said
    (asset,) = [p for p in out.glob("asset.*") if (p / "hybridsync" / "functions").is_dir()]
    assert (asset / "tests" / "minimal_model" / "model.py").is_file()
    assert (asset / "shop" / "routes" / "__init__.py").is_file()  # the project's routes, shipped beside it
    mappings = [r["Properties"] for r in pipeline["Resources"].values()
                if r["Type"] == "AWS::Lambda::EventSourceMapping"]  # fmt: skip
    assert mappings and all(
        m["Enabled"] is False for m in mappings
    )  # paused: created disabled, positions kept
    rules = {k: r["Properties"] for k, r in pipeline["Resources"].items() if r["Type"] == "AWS::Events::Rule"}
    assert all(r["State"] == "DISABLED" for k, r in rules.items() if k.startswith("SqlSync"))
    monitoring = load_template(out, "monitoring")
    alarms = [
        r["Properties"] for r in monitoring["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"
    ]
    assert alarms and all(a["AlarmActions"] == [topic] == a["OKActions"] for a in alarms)
    assert not [r for r in monitoring["Resources"].values() if r["Type"] == "AWS::SNS::Topic"]
    (subscription,) = [r["Properties"] for r in monitoring["Resources"].values()
                       if r["Type"] == "AWS::SNS::Subscription"]  # fmt: skip
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", "oncall@example.com")
