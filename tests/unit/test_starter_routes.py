"""The starter's routes (`hybridsync init`) answer the model's fields only, each as its type's one JSON
type (issue 51): `GET /customers/top` never shows a ranking item's keys (`pk`, `sk`, `rank_pk`,
`rank_sk`) or its `Entity` tag, and a DECIMAL is an exact string whatever its value. Run in a process
of its own: the starter's routes register on the resolver of the process that imports them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema

from hybridsync.cli import scaffold

CALL = textwrap.dedent("""
    import json, sys, types
    from decimal import Decimal

    from hybridsync.api import web
    from hybridsync.local.apigateway.responses import http_event
    from hybridsync.local.awslambda.context import Context
    from hybridsync.model.convert import marshal, unmarshal
    from starter import routes
    from starter.model import TOTALS

    # as DynamoDB gives a ranked item back: its keys, its entity tag, its measures as numbers
    month = {"Period": "2026-11"}
    ranked = [
        TOTALS.entity.item(month | {"CustomerId": "c-1", "Total": Decimal(120), "Invoices": 1}),
        TOTALS.entity.item(month | {"CustomerId": "c-2", "Total": Decimal("12.5"), "Invoices": 2}),
    ]
    routes.rankings = types.SimpleNamespace(top_of=lambda *_: [unmarshal(marshal(i)) for i in ranked])
    routes.dynamodb, routes.table = (lambda: None), (lambda: "data")
    event = http_event("GET", "/customers/top?month=2026-11", [("host", "local")], None)
    answer = web.app.resolve(event, Context())
    from hybridsync.api import openapi
    document = openapi.document("starter", "0")
    print(json.dumps({"raw": sorted(ranked[0]), "status": answer["statusCode"], "body": answer["body"],
                      "document": document}))
""")


def test_the_starters_top_customers_are_the_models_fields_only(tmp_path: Path):
    package = tmp_path / "starter"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(scaffold.MODEL.format(package="starter"))
    (package / "routes.py").write_text(scaffold.ROUTES.format(package="starter"))
    env = {"PYTHONPATH": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-1", "PATH": ""}
    done = subprocess.run([sys.executable, "-c", CALL], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"pk", "sk", "rank_pk", "rank_sk", "Entity"} <= set(result["raw"])  # what the index holds
    assert result["status"] == 200
    answer, document = json.loads(result["body"]), result["document"]
    schema = document["paths"]["/customers/top"]["get"]["responses"]["200"]["content"]["application/json"]
    jsonschema.Draft202012Validator(schema["schema"] | {"components": document["components"]}).validate(
        answer
    )
    assert document["components"]["schemas"]["CustomerTotals"]["properties"]["Total"]["type"] == "string"
    assert answer == {
        "month": "2026-11",
        "customers": [
            {"CustomerId": "c-1", "Period": "2026-11", "Total": "120", "Invoices": 1},
            {"CustomerId": "c-2", "Period": "2026-11", "Total": "12.5", "Invoices": 2},
        ],
    }
