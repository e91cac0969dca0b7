"""Which entity an item is, whoever wrote it: read from its table keys by the model's key templates
(of several that fit, the one fixing the most literal text; a tie names no entity), the entity tag,
when a writer set one, only confirming it. Every consumer places an item this way (write-back, the
aggregation, reconcile, loads), so what `load rows` recognises the live path recognises too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hybridsync.model.declare import Entity, Model, Template, literal_head
from hybridsync.model.errors import Rejected

Match = Callable[[Mapping[str, Any]], "dict[str, str] | None"]


@functools.cache
def matcher(entity: Entity) -> tuple[Match, int]:
    """Reads an item's table keys back into the values the entity's templates were built from
    (None when a key does not fit its template, or the entity's keys are not all templates), and
    how many literal characters the templates fix."""
    builders = {a.name: entity.keys[a.name] for a in entity.table.key_schema()}
    templates = {name: b for name, b in builders.items() if isinstance(b, Template)}
    if len(templates) < len(builders):
        return (lambda keys: None), 0

    def match(keys: Mapping[str, Any]) -> dict[str, str] | None:
        values: dict[str, str] = {}
        for attribute, template in templates.items():
            found = template.read(str(keys.get(attribute, "")))
            if found is None:
                return None
            values |= found
        return values

    return match, sum(t.literal_length for t in templates.values())


Candidate = tuple[Entity, Match, int, tuple[tuple[str, str], ...]]


@functools.cache
def _candidates(model: Model) -> tuple[Candidate, ...]:
    """The user's entities whose keys are templates: what an untagged item can be, each with the
    literal text its keys start with (a cheap test before the templates' own)."""
    out = []
    for entity in (*model.entities, *(s.entity for s in model.time_series)):
        builders = [(a.name, entity.keys[a.name]) for a in entity.table.key_schema()]
        templates = [(name, b) for name, b in builders if isinstance(b, Template)]
        if len(templates) == len(builders):
            heads = tuple((name, t.literal_head) for name, t in templates)
            out.append((entity, *matcher(entity), heads))
    return tuple(out)


@functools.cache
def _tags(model: Model) -> dict[str, Entity]:
    """Every entity an item may be tagged with: the user's, the aggregates', the engine's own."""
    named = {e.name: e for e in (*model.all_entities, *(s.entity for s in model.time_series))}
    try:
        return named | {e.name: e for e in model.jobs.values()}
    except ValueError:  # no table can hold jobs
        return named


def _fitting(model: Model, keys: Mapping[str, Any], table: str | None) -> list[tuple[int, Entity]]:
    """(weight, entity) of the entities whose key templates fit these keys, best first."""
    found = [
        (weight, entity)
        for entity, match, weight, heads in _candidates(model)
        if (table is None or entity.table.name == table)
        and all(str(keys.get(name, "")).startswith(head) and name in keys for name, head in heads)
        and match(keys) is not None
    ]
    return sorted(found, key=lambda f: -f[0])


def place(model: Model, keys: Mapping[str, Any], tag: Any = None, table: str | None = None) -> Entity | None:
    """The entity an item with these table keys (and entity tag, if any) is; None when no entity's
    templates fit an untagged item (a writer outside the model). Raises Rejected when it cannot be
    decided: an unknown tag, a tag the keys contradict, or two entities fitting equally well."""
    if tag is not None:
        entity = _tags(model).get(tag) if isinstance(tag, str) else None
        if entity is None:
            raise Rejected(f"unknown entity {tag!r}")
        match, weight = matcher(entity)
        if weight and match(keys) is None and entity in model.entities:
            raise Rejected(f"tagged {tag}, but its keys {_shown(keys)} do not fit {tag}'s key templates")
        if entity not in model.entities and (fits := _fitting(model, keys, table)):
            # an aggregate's or the engine's name on keys of the user's entity: never dropped silently
            raise Rejected(f"tagged {tag}, but its keys {_shown(keys)} are {fits[0][1].name}'s")
        return entity
    found = _fitting(model, keys, table)
    if not found:
        return None
    if len(found) > 1 and found[0][0] == found[1][0]:
        tied = sorted(e.name for w, e in found if w == found[0][0])
        raise Rejected(
            f"keys {_shown(keys)} fit the key templates of {', '.join(tied)} equally: tag the item"
        )
    return found[0][1]


def _shown(keys: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {str(v)[:60]!r}" for k, v in sorted(keys.items())) + "}"


def key_prefixes(entities: tuple[Entity, ...] | list[Entity]) -> dict[str, list[str]]:
    """Per table key attribute, the texts every key of these entities starts with: what a mapping's
    filter admits records by (`prefix`), so a change of any writer reaches its consumer without a
    tag. An attribute some entity's keys may start with any text is left out (admits all)."""
    by_attribute: dict[str, set[str]] = {}
    open_ended: set[str] = set()
    for entity in entities:
        for attribute in entity.table.key_schema():
            head = literal_head(entity.keys[attribute.name]) if attribute.type == "S" else None
            if not head:
                open_ended.add(attribute.name)
            else:
                by_attribute.setdefault(attribute.name, set()).add(head)
    return {a: _shortest(heads) for a, heads in by_attribute.items() if a not in open_ended}


def _shortest(heads: set[str]) -> list[str]:
    """The heads no other head is a prefix of (`ORDER#` covers `ORDER#LINE#`)."""
    return sorted(h for h in heads if not any(o != h and h.startswith(o) for o in heads))


def key_filter(entities: Sequence[Entity] | list[Entity]) -> dict[str, Any]:
    """The `dynamodb` part of a filter admitting the records of these entities by key prefix
    (empty: a key some entity may start with any text admits every record)."""
    prefixes = key_prefixes(list(entities))
    if not prefixes:
        return {}
    return {"Keys": {a: {"S": [{"prefix": p} for p in heads]} for a, heads in sorted(prefixes.items())}}


def check_keys(entity: Entity, keys: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """Raise Rejected unless the item's table keys are the ones its own attributes build: a writer
    whose keys say one id and whose attributes another would make two items one row."""
    if not all(isinstance(entity.keys[a.name], Template) for a in entity.table.key_schema()):
        return
    try:
        built = entity.key(values)
    except (ValueError, TypeError) as error:
        raise Rejected(f"{entity.name}: its keys cannot be built from its attributes ({error})") from None
    if any(str(built[name]) != str(keys.get(name)) for name in built):
        raise Rejected(
            f"{entity.name}: its keys {_shown(keys)} are not the ones its attributes build ({_shown(built)})"
        )
