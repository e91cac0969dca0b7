"""`cdk synth -c model=...` renders another model: the engine's minimal one (a table `records`
keyed `pk`/`sk`, no GSI, its own reserved names), while this repository's routes still ship."""

import json

from tests.conftest import load_template, synth
from tests.minimal_model.model import MODEL


def test_synth_of_the_minimal_model(tmp_path):
    out = synth(tmp_path / "cdk.out", "model=tests.minimal_model.model:MODEL")
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
    assert MODEL.names.entity in said and '"Entity"' not in said  # the model's reserved names
    assert "Note" in said and "Retraction" in said
    (asset,) = [p for p in out.glob("asset.*") if (p / "hybridsync" / "functions").is_dir()]
    assert (asset / "tests" / "minimal_model" / "model.py").is_file()
    assert (asset / "shop" / "routes" / "__init__.py").is_file()  # the project's routes, shipped beside it
