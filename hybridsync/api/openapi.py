"""The HTTP API described: an OpenAPI 3.1 document generated from the routes as they register
(`web.route`), their bodies' schemas from the model's declared fields (types, `max_length`,
`min`/`max`, required), so the document cannot drift from what the API checks. Served at
`/openapi.json`; the fuzz tier (`hybridsync.testing.fuzz`) generates its requests from it.

Powertools' event handler can generate a document too, from Pydantic models and annotated
handler signatures; docs/benchmarks.md (Cold starts) says why this one is ours. The docs' HTTP API
reference is rendered from it (`hybridsync.cli.reference`)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from hybridsync.model.convert import DECIMAL_TEXT
from hybridsync.model.declare import ID_LENGTH, Entity, Field, FieldType
from hybridsync.model.limits import DEPTH

ROUTES: dict[str, dict[str, dict[str, Any]]] = {}  # OpenAPI path -> method -> operation
SHAPES: dict[str, dict[str, Any]] = {}  # entity name -> the schema of its values in an answer
ERROR = {
    "type": "object",
    "required": ["statusCode", "message"],
    "properties": {"statusCode": {"type": "integer"}, "message": {"type": "string"}},
}
ERRORS = {
    400: "a parameter or field is invalid (the message names it)",
    404: "no such item, or no such route",
    405: "the path exists, not with this method (Allow says which)",
    409: "the item changed meanwhile, or the request contradicts what is stored",
    413: "the body is over 6 MB",
    415: "the body is not application/json in UTF-8",
    503: "PostgreSQL is unavailable: retry later",
}


Schema = dict[str, Any]


def describe(
    method: str,
    rule: str,
    *,
    query: tuple[Any, ...] = (),
    body: Schema | None = None,
    responses: dict[int, str] | None = None,
    parameters: dict[str, Schema] | None = None,
    path_schemas: dict[str, Schema] | None = None,
    returns: Schema | None = None,
) -> None:
    """Record one route: `query` names (or `(name, schema)` pairs, `(name, schema, True)` for a
    required one) of its query parameters, `parameters` the schemas of the shared ones, `body` its
    body's JSON schema, `path_schemas` those of path parameters that are not ids (a number),
    `returns` the schema of its 2xx answers' body (`shape`, `listing`). Its tag is its path's first
    segment (the resource); `summarize` adds its handler's summary."""
    path = re.sub(r"<(\w+)>", r"{\1}", rule)
    shared = parameters or {}
    ids = {"type": "string", "minLength": 1, "maxLength": ID_LENGTH}
    listed = [
        {"name": name, "in": "path", "required": True, "schema": (path_schemas or {}).get(name, ids)}
        for name in re.findall(r"<(\w+)>", rule)
    ]
    for entry in query:
        name, schema, *required = entry if isinstance(entry, tuple) else (entry, shared[entry])
        listed.append({"name": name, "in": "query", "required": any(required), "schema": schema})
    operation: dict[str, Any] = {
        "operationId": f"{method.lower()}_{re.sub(r'[^a-z0-9]+', '_', path.lower()).strip('_')}",
        "tags": [path.strip("/").split("/")[0].split(".")[0]],
        "parameters": listed,
        "responses": {
            str(status): {"description": why} for status, why in (responses or _answers(method)).items()
        }
        | {
            "4XX": {"description": "; ".join(f"{s}: {w}" for s, w in ERRORS.items() if s < 500),
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            "503": {"description": ERRORS[503],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        },
    }  # fmt: skip
    if returns is not None:
        for status, answer in operation["responses"].items():
            if status.startswith("2") and status != "204":
                answer["content"] = {"application/json": {"schema": returns}}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    ROUTES.setdefault(path, {})[method.lower()] = operation


def summarize(method: str, rule: str, doc: str | None) -> None:
    """The route's summary: its handler's docstring, first paragraph (none: none)."""
    summary = " ".join((doc or "").strip().split("\n\n")[0].split())
    if summary:
        ROUTES[re.sub(r"<(\w+)>", r"{\1}", rule)][method.lower()]["summary"] = summary


def _answers(method: str) -> dict[int, str]:
    return {204: "done"} if method == "DELETE" else {200: "the answer"}


def document(title: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route registered so far."""
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": {path: dict(sorted(methods.items())) for path, methods in sorted(ROUTES.items())},
        "components": {"schemas": {"Error": ERROR} | dict(sorted(SHAPES.items()))},
    }


# --- a body's schema from the model's declared fields ------------------------------------------


def field_schema(f: Field) -> dict[str, Any]:
    """What a JSON value of this field may be, as the converters check it (`convert.from_json`)."""
    schema: dict[str, Any]
    if f.type is FieldType.STRING:
        schema = {"type": "string"} | ({"maxLength": f.max_length} if f.max_length else {})
    elif f.type in (FieldType.INTEGER, FieldType.DECIMAL):
        schema = {"type": "integer" if f.type is FieldType.INTEGER else "number"}
        if f.type is FieldType.DECIMAL:  # a number, or the exact string an answer gives back
            schema = {"type": ["number", "string"], "pattern": f"^{DECIMAL_TEXT.pattern}$"}
            schema["description"] = (
                "read exactly, never as a binary float: a JSON number, or a decimal string as answers give it"
            )
        if f.min is not None:
            schema["minimum"] = _number(f.min)
        if f.max is not None:
            schema["maximum"] = _number(f.max)
        if f.scale is not None:
            schema["multipleOf"] = _number(Decimal(1).scaleb(-f.scale))
    elif f.type is FieldType.TIMESTAMP:
        schema = {"type": "string", "format": "date-time"}
    elif f.type is FieldType.BOOLEAN:
        schema = {"type": "boolean"}
    elif f.type is FieldType.JSON:
        schema = {"type": ["object", "array"], "description": f"nested at most {DEPTH} levels"}
    else:
        schema = {"type": "string", "contentEncoding": "base64"}
    return schema


def decimal_pattern(scale: int | None) -> str:
    """What a DECIMAL field's string is in an answer (`web.decimal_text`, `convert.fixed`)."""
    if scale is None:
        return "^-?[0-9]+(\\.[0-9]*[1-9])?$"  # canonical: no exponent, no trailing zeros
    return "^-?[0-9]+$" if scale == 0 else f"^-?[0-9]+\\.[0-9]{{{scale}}}$"


DECIMAL_SHOWN = (
    'an exact decimal, as a JSON string whatever its value (`"120"`, `"12.5"`): a JSON number '
    "would be read as a binary float by most clients, which cannot hold `0.1` exactly"
)


def shown_schema(f: Field) -> dict[str, Any]:
    """What a field is in an answer (`web.shown`): one JSON type per field type. A DECIMAL is an
    exact decimal string; any other type is what its requests send."""
    if f.type is not FieldType.DECIMAL:
        return field_schema(f)
    scale = "" if f.scale is None else f", with exactly {f.scale} digits after the point"
    return {"type": "string", "pattern": decimal_pattern(f.scale), "description": DECIMAL_SHOWN + scale}


def shape(entity: Entity, extra: dict[str, Schema] | None = None) -> Schema:
    """The schema of an entity's values in an answer (registered once, in the document's
    components), with `extra` keys of the route's own (an order's `Lines`)."""
    properties = shown_properties(entity)
    SHAPES[entity.name] = {"type": "object", "properties": properties, "additionalProperties": False}
    if not extra:
        return {"$ref": f"#/components/schemas/{entity.name}"}
    return {"type": "object", "properties": properties | extra, "additionalProperties": False}


def shown_properties(entity: Entity) -> dict[str, Schema]:
    """Each of the entity's fields as an answer shows it (`shown_schema`)."""
    return {f.attribute: shown_schema(f) for f in entity.all_fields}


CURSOR = {"type": ["string", "null"], "description": "the next page's cursor; null on the last page"}


def listing(**members: Schema) -> Schema:
    """An answer holding named lists and values: `listing(orders=array(shape(ORDER)), cursor=CURSOR)`."""
    return {"type": "object", "properties": members, "required": list(members)}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _number(value: Any) -> int | float:
    return int(value) if value == int(value) else float(value)


def fields(entity: Entity, names: tuple[str, ...], *, partial: bool = False,
           extra: dict[str, Schema] | None = None, required: tuple[str, ...] = ()) -> Schema:  # fmt: skip
    """The schema of a body holding these fields of the entity (and `extra` keys of the route's
    own); a field is required when the entity requires it and has no default (none is, `partial`)."""
    properties = {name: field_schema(entity.field(name)) for name in names} | (extra or {})
    needed = (
        [] if partial else [n for n in names if entity.field(n).required and entity.field(n).default is None]
    )
    return {"type": "object", "properties": properties, "required": [*needed, *required],
            "additionalProperties": False}  # fmt: skip


SWAGGER_UI = """<!doctype html>
<html><head><meta charset="utf-8"><title>API</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "openapi.json", dom_id: "#ui"});</script></body></html>
"""
