"""Index keys brought up to the model, for a deploy that adds an index or changes how one of its
keys is built. Items written before keep the keys they were written with (or none), so the index
misses them until they are next written. `reindex` reads a table (a paced Scan), derives each
item's index keys from the model the way its writers do (`Entity.keys`), sets the ones that differ
and removes the ones that no longer apply.

Items are placed by their table keys (`hybridsync.model.placing`), whoever wrote them: tagged or not,
with a version or without one. Each update is conditioned on what was read: every attribute of
the item and the keys it changes (never on a version alone: a writer outside the model may change
an item without bumping it, or restart its counter after a delete). An item written meanwhile
already has its keys from the new model and is left as it is; a second run changes nothing.
Primary keys are never touched (a changed primary key is another item), nor items of no entity
the model declares on the table, nor items whose values the model refuses (bad input: the
consumers dead-letter those). Each update is a MODIFY on the stream that changes no value the
consumers read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from hybridsync.dynamodb import capacity
from hybridsync.dynamodb.scans import Pacer
from hybridsync.model import placing
from hybridsync.model.convert import marshal, to_values
from hybridsync.model.declare import Entity, Model, Table
from hybridsync.model.errors import Rejected


@dataclass
class Counts:
    checked: int = 0
    current: int = 0
    updated: int = 0  # out of date (a dry run: would be updated)
    written_meanwhile: int = 0  # changed between the scan and the update: left to its writer's keys
    invalid: int = 0  # values the model refuses (bad input, dead-lettered by the consumers): left alone


@dataclass
class Report:
    entities: dict[str, Counts] = field(default_factory=dict)
    not_declared: int = 0  # items of no entity (none decidable) the model declares on the table: left alone
    write_units: float = 0.0  # by the capacity model, index entries included
    failed: list[str] = field(default_factory=list)  # items DynamoDB refused to update, and why
    examples: list[str] = field(default_factory=list)  # the first out-of-date items and their keys' change
    invalid: list[str] = field(default_factory=list)  # the first items whose values the model refuses

    @property
    def out_of_date(self) -> int:
        return sum(c.updated for c in self.entities.values())


def changes(entity: Entity, item: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The index keys to set (derived value differs) and to remove (no longer applies)."""
    primary = {a.name for a in entity.table.key_schema()}
    sets, removes = {}, []
    for name, build in entity.keys.items():
        if name in primary:
            continue
        value = build(item)
        if value is None:
            if name in item:
                removes.append(name)
        elif item.get(name) != value:
            sets[name] = value
    return sets, removes


def update_request(entity: Entity, item: dict[str, Any], sets: dict[str, Any], removes: list[str]) -> dict:
    """The UpdateItem that sets and removes those keys if the item is still as read: every
    attribute it was read with (a version alone proves nothing of a writer outside the model)."""
    primary = [a.name for a in entity.table.key_schema()]
    watched = [n for n in item if n not in primary]
    at = {name: n for n, name in enumerate(sorted({*watched, *sets, *removes}))}  # placeholder numbers
    values: dict[str, Any] = {}
    conditions = []
    for name, n in at.items():
        if name in item:
            values[f":was{n}"] = item[name]
            conditions.append(f"#a{n} = :was{n}")
        else:
            conditions.append(f"attribute_not_exists(#a{n})")
    expression = []
    if sets:
        values |= {f":new{at[name]}": value for name, value in sets.items()}
        expression.append("SET " + ", ".join(f"#a{at[name]} = :new{at[name]}" for name in sets))
    if removes:
        expression.append("REMOVE " + ", ".join(f"#a{at[name]}" for name in removes))
    return {
        "Key": marshal({name: item[name] for name in primary}),
        "UpdateExpression": " ".join(expression),
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": {f"#a{n}": name for name, n in at.items()},
        "ExpressionAttributeValues": marshal(values),
    }


def reindex(
    client: Any,
    table_name: str,
    table: Table,
    model: Model,
    items: Iterable[dict[str, Any]],
    *,
    dry_run: bool = False,
    rate: float | None = None,
) -> Report:
    """Bring the index keys of `items` (read from `table_name`, of the model's `table`) up to the
    model; `rate`: write units per second at most. A dry run only counts what is out of date."""
    declared = {e for e in model.all_entities if e.table is table}
    report, pacer = Report(), Pacer(rate)
    for item in items:
        key = {a.name: item.get(a.name) for a in table.key_schema()}
        try:  # by its keys, whoever wrote it (the tag, when there is one, only confirming them)
            entity = placing.place(model, key, item.get(model.names.entity), table.name)
        except Rejected as why:
            entity = None
            if len(report.invalid) < 10:
                report.invalid.append(f"{key}: {why}")
        if entity is None or entity not in declared:
            report.not_declared += 1
            continue
        counts = report.entities.setdefault(entity.name, Counts())
        counts.checked += 1
        try:
            to_values(entity, item)  # keys are derived from values the model accepts, never guessed
        except Rejected as why:
            counts.invalid += 1
            if len(report.invalid) < 10:
                report.invalid.append(f"{entity.name} {key}: {why}")
            continue
        sets, removes = changes(entity, item)
        if not sets and not removes:
            counts.current += 1
            continue
        after = {k: v for k, v in (item | sets).items() if k not in removes}
        if len(report.examples) < 10:
            report.examples.append(f"{entity.name} {key}: set {sorted(sets)}, remove {sorted(removes)}")
        units = capacity.write_cost(table, item, after)
        if not dry_run:
            try:
                client.update_item(TableName=table_name, **update_request(entity, item, sets, removes))
            except ClientError as error:
                code = error.response["Error"]["Code"]
                if code == "ConditionalCheckFailedException":
                    counts.written_meanwhile += 1
                else:
                    report.failed.append(
                        f"{entity.name} {key}: {code}: {error.response['Error'].get('Message', '')}"
                    )
                continue
            pacer.spend(units)
        counts.updated += 1
        report.write_units += units
    return report
