"""The dead-letter store: records a consumer could not apply, with the reason, kept in PostgreSQL."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from hybridsync.schema import dead_letters


@dataclass(frozen=True)
class DeadLetter:
    record: dict[str, Any]
    reason: str


class Rejected(Exception):
    """A record that can never be applied as it is: it becomes a dead letter with this reason."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


T = TypeVar("T")


def triage(
    records: Iterable[dict[str, Any]], parse: Callable[[dict[str, Any]], T | None]
) -> tuple[list[T], list[DeadLetter], int]:
    """Parse each record: (what parsed, dead letters for the rejected ones, how many were not for
    this consumer). One bad record never stops the others."""
    parsed: list[T] = []
    rejected: list[DeadLetter] = []
    skipped = 0
    for record in records:
        try:
            result = parse(record)
        except Rejected as error:
            rejected.append(DeadLetter(record, error.reason))
            continue
        if result is None:
            skipped += 1
        else:
            parsed.append(result)
    return parsed, rejected, skipped


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def as_json(record: dict[str, Any]) -> Any:
    """The record as JSON-safe data, whatever client produced it (Lambda event or boto3)."""
    return json.loads(json.dumps(record, default=_json_default))


def store(conn: sa.Connection, source: str, letters: Iterable[DeadLetter]) -> int:
    """Store dead letters; one whose record (by eventID) is already stored is not stored twice,
    so replaying a batch does not multiply its dead letters."""
    rows = [
        {"source": source, "event_id": _event_id(d.record), "reason": d.reason, "record": as_json(d.record)}
        for d in letters
    ]
    if rows:
        statement = insert(dead_letters).on_conflict_do_nothing(constraint="uq_dead_letters_source_event")
        conn.execute(statement, rows)
    return len(rows)


def _event_id(record: dict[str, Any]) -> str | None:
    event_id = record.get("eventID") if isinstance(record, dict) else None
    return str(event_id) if event_id else None


def pending(conn: sa.Connection, source: str | None = None, ids: list[int] | None = None) -> list[Any]:
    query = sa.select(dead_letters).where(dead_letters.c.redriven_at.is_(None)).order_by(dead_letters.c.id)
    if source:
        query = query.where(dead_letters.c.source == source)
    if ids:
        query = query.where(dead_letters.c.id.in_(ids))
    return list(conn.execute(query))


def mark_redriven(conn: sa.Connection, ids: list[int]) -> None:
    if ids:
        conn.execute(
            dead_letters.update().where(dead_letters.c.id.in_(ids)).values(redriven_at=sa.func.now())
        )


DEAD_LETTER_METRIC = "DeadLetters"  # the pipeline stack's dead-letter alarms watch this name


def report(metrics: Any, logger: Any, letters: list[DeadLetter]) -> None:
    """What every consumer says about its dead letters: the alarmed metric and one log line each."""
    from aws_lambda_powertools.metrics import MetricUnit

    metrics.add_metric(DEAD_LETTER_METRIC, MetricUnit.Count, len(letters))
    for letter in letters:
        logger.warning(
            "dead letter", extra={"reason": letter.reason, "eventID": letter.record.get("eventID")}
        )
