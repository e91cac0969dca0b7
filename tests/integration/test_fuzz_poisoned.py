"""A failing fuzz names what it poisoned (bench/fuzz.py's examples, issue 51): each dead letter that
appeared during the run, with its reason and the accepted requests that wrote its item; each key
that drifted, with the requests that named it; a letter older than the run is not the run's."""

from __future__ import annotations

import json
import types
import uuid

import sqlalchemy as sa

from hybridsync.runtime import db
from hybridsync.sql import schema
from hybridsync.sync.reconcile import Drift
from hybridsync.testing import fuzz
from shop_workloads.fuzz import poisoned_examples

REASON = "tagged Follow, but its keys {PK: 'USER#a\\r\\nb', ...} do not fit Follow's key templates"


def letter(conn: sa.Connection, reason: str, keys: dict[str, str]) -> int:
    record = {"eventID": uuid.uuid4().hex, "dynamodb": {"Keys": {k: {"S": v} for k, v in keys.items()}}}
    return conn.execute(
        sa.insert(schema.dead_letters).returning(schema.dead_letters.c.id),
        {"source": "write_back", "event_id": record["eventID"], "reason": reason, "record": record},
    ).scalar_one()


def test_each_new_dead_letter_and_drifted_key_names_the_requests_that_wrote_it(empty_database):
    engine = db.create_engine(empty_database)
    try:
        schema.dead_letters.create(engine)
        figures = fuzz.Figures()
        follow = fuzz.Request("PUT /users/a%0D%0Ab/follows/u2", "PUT", "/users/a%0D%0Ab/follows/u2", (), b"")
        review = fuzz.Request("PUT /products/p9/reviews/r9", "PUT", "/products/p9/reviews/r9", (),
                              json.dumps({"CustomerId": "c9"}).encode())  # fmt: skip
        figures.accepted_writes += [(r.shown(), fuzz.decoded(r)) for r in (follow, review)]
        with engine.begin() as conn:
            before = letter(conn, "an earlier run's", {"PK": "USER#u7", "SK": "FOLLOWS#u2"})
            letter(conn, REASON, {"PK": "USER#a\r\nb", "SK": "FOLLOWS#u2"})
        verdict = types.SimpleNamespace(drifts=[Drift(missing=[("p9", "r9")])])
        lines = poisoned_examples(engine, before, figures, verdict)  # type: ignore[arg-type]
    finally:
        engine.dispose()
    assert lines == [
        f"accepted_then_poisoned: {follow.shown()} -> dead letter (write_back): {REASON}",
        f"accepted_then_poisoned: {review.shown()} -> drift (missing ('p9', 'r9'))",
    ]
