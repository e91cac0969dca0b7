"""The API described: the OpenAPI 3.1 document is generated from the routes as they register, served
at /openapi.json, checked into docs/ (`hybridsync openapi --out docs/openapi.json` refreshes it), and
every schema in it is valid JSON Schema (2020-12, OpenAPI 3.1's dialect)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from tests.handlers import http, load

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def api(handler_env):
    return load("api")


def test_the_document_is_served_and_describes_every_route(api):
    code, document, _ = http(api, "GET", "/openapi.json")
    assert code == 200 and document == json.loads(json.dumps(api.document()))
    assert document["openapi"] == "3.1.0"
    described = {(path, method.upper()) for path, methods in document["paths"].items() for method in methods}
    registered = {
        (re.sub(r"<(\w+)>", r"{\1}", rule), m) for rule, methods in api.ROUTES.items() for m in methods
    }
    assert described == registered and len(described) >= 35


def test_every_schema_in_it_is_valid_json_schema(api):
    document = api.document()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for parameter in operation["parameters"]:
                jsonschema.Draft202012Validator.check_schema(parameter["schema"])
                assert parameter["in"] != "path" or "{" + parameter["name"] + "}" in path
            if body := operation.get("requestBody"):
                jsonschema.Draft202012Validator.check_schema(body["content"]["application/json"]["schema"])
            assert "4XX" in operation["responses"], (method, path)


def test_a_body_schema_says_what_the_model_declares(api):
    document = api.document()
    line = document["paths"]["/orders"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    item = line["properties"]["Lines"]["items"]
    assert item["properties"]["Quantity"] == {"type": "integer", "minimum": 1, "maximum": 10_000}
    assert line["required"] == ["CustomerId", "Lines"] and line["additionalProperties"] is False
    jsonschema.validate(
        {"CustomerId": "c", "Lines": [{"ProductId": "p", "Quantity": 2, "UnitPrice": 1}]}, line
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"CustomerId": "c", "Lines": [{"ProductId": "p", "Quantity": 0, "UnitPrice": 1}]}, line
        )


def test_the_checked_in_document_is_the_generated_one(api):
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert checked_in == json.loads(json.dumps(api.document())), (
        "run: hybridsync openapi --out docs/openapi.json"
    )


def test_the_command_prints_the_same_document(api, capsys):
    from hybridsync import cli

    assert cli.main(["openapi"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(api.document()))


def test_every_example_of_the_http_reference_is_a_request_the_api_takes(api):
    """The reference's curl lines (hybridsync.cli.reference), writes first: none is refused for its
    shape (400, 405, 413, 415) or fails (5xx); a 404 or 409 is an id the examples did not create."""
    from urllib.parse import parse_qsl, urlsplit

    from hybridsync.cli import reference

    order = {"PUT": 0, "POST": 1, "PATCH": 2, "GET": 3, "DELETE": 4}
    answered = {}
    for path, method, operation in sorted(reference.operations(api.document()), key=lambda r: order[r[1]]):
        target, body = reference.example_request(path, operation)
        split = urlsplit(target)
        code, answer, _ = http(api, method, split.path, body, **dict(parse_qsl(split.query)))
        answered[f"{method} {path}"] = code
        assert code in (200, 201, 204, 404, 409), (method, target, code, answer)
    assert answered["POST /orders"] == 201 and answered["GET /products/top"] == 200
