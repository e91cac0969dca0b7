"""What the console draws (hybridsync.local.console.views, .diagram), with no app running: every
value from the data escaped, and each dead letter's item a link that traces it."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from hybridsync.local.console import diagram, views
from shop.model import MODEL

pytestmark = pytest.mark.unit


def letter(id: int, source: str, record: dict, reason: str) -> SimpleNamespace:
    return SimpleNamespace(id=id, created_at=datetime(2026, 11, 30, tzinfo=UTC), source=source, record=record,
                           reason=reason)  # fmt: skip


def test_a_letter_links_to_its_item_and_nothing_it_holds_is_markup():
    arn = "arn:aws:dynamodb:us-east-1:1:table/app-main/stream/2026"
    stream = {"eventName": "INSERT", "eventSourceARN": arn,
              "dynamodb": {"Keys": {"PK": {"S": "CUSTOMER#<b>"}, "SK": {"S": "INFO"}}}}  # fmt: skip
    outbox = {"outbox_id": 7, "table_name": "product_availability", "row_key": {"product_id": "p-1"}}
    drawn = views.letters([letter(2, "sql_sync", outbox, "a price past 38 digits"),
                           letter(1, "write_back", stream, "<script>alert(1)</script>")],
                          2, MODEL, {"app-main": "main"}, ("write_back", "sql_sync"))  # fmt: skip
    assert "<script>" not in drawn and "&lt;script&gt;" in drawn and "CUSTOMER#&lt;b&gt;" in drawn
    assert 'hx-get="/trace?table=main&amp;key=PK%3DCUSTOMER%23%3Cb%3E%0ASK%3DINFO"' in drawn
    assert 'hx-get="/trace?table=ProductAvailability&amp;key=ProductId%3Dp-1"' in drawn  # by its sql_key
    assert drawn.count(">redrive</button>") == 2 and "2 pending" in drawn


def test_the_diagram_escapes_what_the_app_names():
    d = diagram.Diagram()
    d.add(diagram.Box("table:<x>", 0, "<x>", ["1 item"]))
    d.add(diagram.Box("stream:<x>", 1, "stream of <x>"))
    d.link("table:<x>", "stream:<x>")
    drawn = diagram.svg(d)
    assert "<x>" not in drawn and 'id="table:&lt;x&gt;"' in drawn and drawn.count("<path") >= 2
