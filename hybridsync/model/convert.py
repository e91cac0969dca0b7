"""Values between DynamoDB and PostgreSQL, both ways: the one decoder of DynamoDB attribute values,
an item image as the SQL row its mapping declares (rejecting what the mapping cannot hold), and a
SQL row as item values. Numbers stay exact everywhere: DynamoDB's 38 digits, never a float."""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable, Mapping
from decimal import Context, Decimal
from typing import Any

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from hybridsync.model import keys, limits
from hybridsync.model.declare import Entity, Field, FieldType
from hybridsync.model.errors import Invalid, Rejected
from hybridsync.model.limits import NUMBER_RANGE

BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
WIDE = Context(prec=200)  # exact for any number DynamoDB or a NUMERIC column holds

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def marshal(item: dict[str, Any]) -> dict[str, Any]:
    """Python values -> DynamoDB JSON (what the low-level client sends). A number spelled with more
    than 38 digits only by its trailing zeros (`1E+38` as DynamoDB gives it back: 39 digits) is sent
    as the number it is; one DynamoDB cannot store raises Rejected naming its attribute (boto3's own
    error names neither)."""
    try:
        return {name: _serializer.serialize(value) for name, value in item.items()}
    except ArithmeticError:
        out = {}
        for name, value in item.items():
            try:
                out[name] = _serialize_exact(value)
            except ArithmeticError:
                why = f"{name} holds a number DynamoDB cannot store ({NUMBER_RANGE}): {_shown(value)}"
                raise Rejected(why) from None
        return out


def _serialize_exact(value: Any) -> dict[str, Any]:
    serialized: dict[str, Any]  # an AttributeValue (boto3's serializer is untyped)
    try:
        serialized = _serializer.serialize(value)
    except ArithmeticError:
        serialized = _serializer.serialize(_without_trailing_zeros(value))
    return serialized


def _without_trailing_zeros(value: Any) -> Any:
    """The same numbers, their trailing zeros dropped (exactly: a context wide enough never rounds);
    what is still over 38 digits the serializer refuses."""
    if isinstance(value, Decimal) and value.is_finite():
        return value.normalize(WIDE)
    if isinstance(value, dict):
        return {k: _without_trailing_zeros(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_trailing_zeros(v) for v in value]
    if isinstance(value, set | frozenset):
        return {_without_trailing_zeros(v) for v in value}
    return value


def attribute_value(attribute: dict[str, Any]) -> Any:
    """One DynamoDB-JSON attribute value; scalars on a fast path, the rest through boto3. Binary
    comes as bytes from boto3 and as base64 text in a Lambda event (both are read)."""
    ((kind, raw),) = attribute.items()
    if kind == "S" or kind == "BOOL":
        return raw
    if kind == "N":
        return Decimal(raw)  # raises on a malformed number, where boto3 would return NaN
    if kind == "NULL":
        return None
    return _deserializer.deserialize(_binary_as_bytes(attribute))


def _binary_as_bytes(attribute: dict[str, Any]) -> dict[str, Any]:
    """The attribute with a Lambda event's base64 binary (`{"B": "AQID"}`, in sets, maps and lists
    too) as the bytes boto3 reads."""
    ((kind, raw),) = attribute.items()
    if kind == "B" and isinstance(raw, str):
        return {"B": base64.b64decode(raw)}
    if kind == "BS":
        return {"BS": [base64.b64decode(v) if isinstance(v, str) else v for v in raw]}
    if kind == "M" and isinstance(raw, dict):
        return {
            "M": {
                k: _binary_as_bytes(v) if isinstance(v, dict) and len(v) == 1 else v for k, v in raw.items()
            }
        }
    if kind == "L" and isinstance(raw, list):
        return {"L": [_binary_as_bytes(v) if isinstance(v, dict) and len(v) == 1 else v for v in raw]}
    return attribute


def unmarshal(image: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB JSON (an item, or a stream image) -> Python values."""
    return {name: attribute_value(value) for name, value in image.items()}


# --- an item image -> its SQL row ------------------------------------------------------------


def to_row(entity: Entity, image: dict[str, Any]) -> dict[str, Any]:
    """An item's values as the SQL row its mapping declares; raises Rejected naming the attribute."""
    return _converted(entity, image, by_column=True)


def to_values(entity: Entity, image: dict[str, Any]) -> dict[str, Any]:
    """An item's (decoded) values checked and typed as its fields declare (timestamps as datetimes),
    keyed by attribute; raises Rejected naming the attribute."""
    return _converted(entity, image, by_column=False)


def _converted(entity: Entity, image: dict[str, Any], *, by_column: bool) -> dict[str, Any]:
    out = {}
    for attribute, column, convert, required, is_key, f in _plan(entity):
        value = image.get(attribute)
        if value is None:
            if is_key:
                raise Rejected(f"{entity.name}: missing key attribute {attribute}")
            value = f.default  # an item written before the field was declared
            if value is None and required:
                raise Rejected(f"{entity.name}: missing required attribute {attribute}")
        out[column if by_column else attribute] = None if value is None else convert(f, value)
    return out


@functools.cache
def _plan(entity: Entity) -> tuple[tuple[str, str, Callable[[Field, Any], Any], bool, bool, Field], ...]:
    """Per field: what `to_row` needs, looked up once (it runs for every record)."""
    return tuple(
        (f.attribute, f.column, CONVERTERS[f.type], f.required, f.attribute in entity.sql_key, f)
        for f in entity.fields
    )


def _reject(f: Field, expected: str, value: Any) -> Rejected:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return Rejected(f"{f.attribute} must be {expected}, got {type(value).__name__} {shown}")


def to_string(f: Field, value: Any) -> str:
    if type(value) is not str:
        raise _reject(f, "a string", value)
    if f.max_length is not None and len(value) > f.max_length:
        raise Rejected(f"{f.attribute} is {len(value)} characters long, over its limit of {f.max_length}")
    if problem := limits.text_problem(value):  # JSON escapes can smuggle either into an event
        raise Rejected(f"{f.attribute} {problem}")
    return value


def to_integer(f: Field, value: Any) -> int:
    if type(value) is not Decimal or value != value.to_integral_value():
        raise _reject(f, "an integer", value)
    if not BIGINT_MIN <= value <= BIGINT_MAX:
        raise Rejected(f"{f.attribute} = {value} is outside the 64-bit range of its column")
    _within(f, value)
    return int(value)


def to_decimal(f: Field, value: Any) -> Decimal:
    # boto3 decodes a malformed number ("twelve") as NaN, which PostgreSQL's numeric would accept
    if type(value) is not Decimal or not value.is_finite():
        raise _reject(f, "a number", value)
    if problem := limits.number_problem(value):
        raise Rejected(f"{f.attribute} = {_shown(value)} {problem}")
    _within(f, value)
    if f.scale is not None and value != _scaled(value, f.scale):  # its column would round it
        raise Rejected(f"{f.attribute} = {value} has more digits after the point than its scale, {f.scale}")
    return value


def _within(f: Field, value: Decimal) -> None:
    """The declaration's own range (`Field(min=, max=)`)."""
    if f.min is not None and value < f.min:
        raise Rejected(f"{f.attribute} must be at least {f.min}, got {_shown(value)}")
    if f.max is not None and value > f.max:
        raise Rejected(f"{f.attribute} must be at most {f.max}, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fixed(value: Decimal, scale: int) -> str:
    """A decimal with exactly `scale` digits after the point (`12.30`): how a field with a declared
    scale is shown, whichever side it was read from (DynamoDB keeps 12.3)."""
    return format(_scaled(value, scale), "f")


def _scaled(value: Decimal, scale: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-scale), context=WIDE)


def to_timestamp(f: Field, value: Any) -> Any:
    try:
        return keys.parse_iso(to_string(f, value))
    except ValueError:
        raise _reject(f, "an ISO-8601 timestamp with a timezone", value) from None


def to_boolean(f: Field, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _reject(f, "a boolean", value)
    return value


def to_json(f: Field, value: Any) -> str:
    if not isinstance(value, dict | list | set):
        raise _reject(f, "a map, list or set", value)
    if problem := limits.value_problem(f.attribute, value):
        raise Rejected(problem)
    return json_text(value)


def to_binary(f: Field, value: Any) -> bytes:
    if not isinstance(value, Binary | bytes):
        raise _reject(f, "binary", value)
    return value.value if isinstance(value, Binary) else value


CONVERTERS: dict[FieldType, Callable[[Field, Any], Any]] = {
    FieldType.STRING: to_string,
    FieldType.INTEGER: to_integer,
    FieldType.DECIMAL: to_decimal,
    FieldType.TIMESTAMP: to_timestamp,
    FieldType.BOOLEAN: to_boolean,
    FieldType.JSON: to_json,
    FieldType.BINARY: to_binary,
}


def json_text(value: Any) -> str:
    """JSON for a DynamoDB value that keeps numbers literal (38 digits stay 38 digits; json.dumps
    would go through float) and writes sets as sorted lists and binary as base64."""
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{json_text(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if isinstance(value, set | frozenset):
        return json_text(sorted(value, key=lambda v: v.value if isinstance(v, Binary) else v))
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, Decimal | int):
        if isinstance(value, Decimal) and not value.is_finite():
            raise Rejected(f"not a number in a nested value: {value}")
        return str(value)
    if isinstance(value, Binary):
        return json.dumps(base64.b64encode(value.value).decode())
    return json.dumps(value, ensure_ascii=False)


# --- a SQL row -> item values ----------------------------------------------------------------


def item_values(entity: Entity, row: dict[str, Any]) -> dict[str, Any]:
    """A SQL row (as JSON, numbers exact) as the entity's DynamoDB attribute values."""
    values: dict[str, Any] = {}
    for f in entity.fields:
        value = row.get(f.column)
        if value is None:
            continue
        if f.type is FieldType.TIMESTAMP:
            value = keys.iso_ms(keys.parse_iso(value) if isinstance(value, str) else value)
        elif f.type in (FieldType.INTEGER, FieldType.DECIMAL):
            value = Decimal(value)
            if len(value.as_tuple().digits) > limits.DIGITS:  # a scale's zeros (1E+37 as NUMERIC(40,2))
                value = value.normalize(WIDE)
        elif f.type is FieldType.BINARY and isinstance(value, str):
            value = bytes.fromhex(value.removeprefix("\\x"))  # to_jsonb spells bytea as "\\x0a1b..."
        values[f.attribute] = value
    return values


def jsonable(value: Any) -> Any:
    """A decoded value as JSON-ready data: integral numbers as integers, others as exact decimal
    strings in DynamoDB's canonical form (no trailing zeros: DynamoDB stores 3.50 as 3.5, so a view
    read from PostgreSQL and the same view read from DynamoDB print alike), sets as sorted lists."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else format(value, "f").rstrip("0")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(jsonable(v) for v in value)
    return value


# --- a JSON request body -> item values ------------------------------------------------------

# A DECIMAL as the API writes it (a JSON string: hybridsync.api.web.shown), or as JSON's number
# grammar has it; nothing Python's Decimal also reads ("NaN", "1_000", " 1", "Infinity").
DECIMAL_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", re.ASCII)


def from_json(
    entity: Entity, body: Any, attributes: tuple[str, ...], *, partial: bool = False
) -> dict[str, Any]:
    """The named attributes of a JSON object (numbers parsed as Decimal) as the entity's values,
    checked by the same converters as the write-back; raises Invalid naming the first bad field.
    `partial`: a change of some fields, so a required one may be left out."""
    if not isinstance(body, dict):
        raise Invalid("body", "body must be a JSON object")
    unknown = sorted(set(body) - set(attributes))
    if unknown:
        raise Invalid(unknown[0], f"{unknown[0]} is not a field of this request")
    values: dict[str, Any] = {}
    for name in attributes:
        f = entity.field(name)
        value = body.get(name)
        if value is None or value == "":
            if f.required and f.default is None and not partial:
                raise Invalid(name, f"{name} is required")
            continue  # a default is filled in by the item
        if f.type is FieldType.DECIMAL and type(value) is str and DECIMAL_TEXT.fullmatch(value):
            value = Decimal(value)  # what the API answers with (an exact decimal string), sent back
        try:
            converted = CONVERTERS[f.type](f, value)
        except Rejected as error:
            raise Invalid(name, str(error)) from None
        values[name] = (
            keys.iso_ms(converted)
            if f.type is FieldType.TIMESTAMP
            else (value if f.type is FieldType.JSON else converted)
        )
    if (size := limits.item_size(values)) > limits.ITEM_BYTES:  # its item would be larger still
        largest = limits.largest(values)
        raise Invalid(largest, f"{largest}: its item would be over DynamoDB's {limits.ITEM_BYTES} bytes "
                               f"(these fields alone are {size})")  # fmt: skip
    return values


def writer_version(entity: Entity, values: Mapping[str, Any]) -> int | None:
    """The writer's own version of an item, when it keeps one (carried, never trusted for order);
    raises Rejected when it is not an integer within 64 bits."""
    raw = values.get(entity.names.version)
    return None if raw is None else to_integer(entity.field(entity.names.version), raw)
