"""Every value the value contract admits in a key is placed (issue 51, item 10): a key template
reads back what it built, whatever characters its values hold (line breaks, separators, emoji),
and the write-back places a stream record whose keys hold them, tagged or not. Before, a template
read with `.` not matching a line break: `USER#a\\r\\nb` fit no template and its item was
dead-lettered (`tagged Follow, but its keys ... do not fit Follow's key templates`), never synced."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridsync.model import limits
from hybridsync.model.convert import marshal
from hybridsync.model.declare import FieldType, Template
from hybridsync.sync.writeback import Change, decode
from hybridsync.testing import sample_values
from shop.model import FOLLOW, MODEL

# The contract's whole alphabet: any code point but NUL and the lone surrogates (limits.text_problem).
CONTRACT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
# what a key value may be: at least one character (an empty value builds no key), the contract's
# characters, line breaks and the key separator drawn often
VALUES = st.text(st.one_of(CONTRACT, st.sampled_from("\r\n\u2028\u0085#{}.*+?\\")), min_size=1, max_size=40)
LITERALS = st.text(st.one_of(CONTRACT, st.sampled_from("#\n")), max_size=8)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_a_key_holding_a_line_break_reads_back():
    """The issue's own case: `read` compiled `(.+?)` without DOTALL."""
    assert Template("USER#{UserId}").read("USER#a\r\nb") == {"UserId": "a\r\nb"}
    assert Template("FOLLOWS#{A}#{B}").read("FOLLOWS#x\ny#z\n") == {"A": "x\ny", "B": "z\n"}


@FAST
@given(head=LITERALS, tail=LITERALS, value=VALUES)
def test_a_template_of_one_value_reads_back_every_value_the_contract_admits(head, tail, value):
    def escaped(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}")

    template = Template(escaped(head) + "{V}" + escaped(tail))
    assert limits.text_problem(value) is None
    assert template.read(template({"V": value})) == {"V": value}


@FAST
@given(first=VALUES, second=VALUES)
def test_a_template_of_several_values_always_fits_and_reads_back_values_free_of_its_separator(first, second):
    """`A#{X}#{Y}` with X = `a#b` is ambiguous as text; it still fits (what placing asks), reads
    values that build the same key, and reads back exactly values free of the separator."""
    template = Template("A#{X}#{Y}")
    built = template({"X": first, "Y": second})
    found = template.read(built)
    assert found is not None and template(found) == built
    if "#" not in first:
        assert found == {"X": first, "Y": second}


def record(entity: Any, values: dict[str, Any], *, tagged: bool) -> dict[str, Any]:
    item = entity.item(values)
    if not tagged:
        item.pop(MODEL.names.entity)
    keys = {a.name: item[a.name] for a in entity.table.key_schema()}
    return {
        "eventID": "e-1",
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"Keys": marshal(keys), "NewImage": marshal(item), "SequenceNumber": "100",
                     "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }  # fmt: skip


def key_strings(entity: Any) -> list[str]:
    """The string fields an entity's table keys are built from."""
    from hybridsync.model.declare import reads

    read = {n for a in entity.table.key_schema() for n in reads(entity.keys[a.name])}
    return sorted(n for n in read if entity.field(n).type is FieldType.STRING)


WRITTEN_BACK = [e for e in MODEL.written_back() if key_strings(e)]


@pytest.mark.parametrize("entity", WRITTEN_BACK, ids=lambda e: e.name)
@pytest.mark.parametrize("tagged", [True, False], ids=["tagged", "untagged"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_write_back_places_an_item_whatever_contract_text_its_keys_hold(entity, tagged, data):
    """Tagged as the engine's writers and the API write it, or untagged as any service may: the
    record is a change of its entity, never a dead letter. (Untagged keys whose values hold the
    separator may fit a longer template better: such a writer tags its items, writers.md.)"""
    drawn = VALUES if tagged else VALUES.filter(lambda v: "#" not in v)
    values = sample_values(entity, 3)
    for name in key_strings(entity):
        limit = entity.field(name).max_length or 40
        values[name] = data.draw(drawn.filter(lambda v, limit=limit: len(v) <= limit), label=name)
    change = decode(record(entity, values, tagged=tagged), MODEL)
    assert isinstance(change, Change) and change.entity is entity


def test_the_issues_follow_is_written_back():
    values = sample_values(FOLLOW, 1) | {"FollowerId": "a\r\nb", "Version": Decimal(1)}
    change = decode(record(FOLLOW, values, tagged=True), MODEL)
    assert isinstance(change, Change) and change.row["follower_id"] == "a\r\nb"
