"""The dead-letter store (PostgreSQL table `dead_letters`) and how consumers report to it.

Storage takes a connection: SQLAlchemy is imported with the first dead letter, so a consumer that
never touches PostgreSQL otherwise (the aggregation) keeps it out of its cold start.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hybridsync.streams.records import DeadLetter, as_json

if TYPE_CHECKING:
    import sqlalchemy as sa

DEAD_LETTER_METRIC = "DeadLetters"  # the pipeline stack's dead-letter alarms watch this name


def store(conn: sa.Connection, source: str, letters: Iterable[DeadLetter]) -> int:
    """Store dead letters; one whose record (by eventID) is already stored is not stored twice,
    so replaying a batch does not multiply its dead letters."""
    from sqlalchemy.dialects.postgresql import insert

    from hybridsync.sql.schema import dead_letters

    rows = [
        {"source": source, "event_id": _event_id(d), "reason": d.reason, "record": as_json(d.record)}
        for d in letters
    ]
    if rows:
        statement = insert(dead_letters).on_conflict_do_nothing(constraint="uq_dead_letters_source_event")
        conn.execute(statement, rows)
    return len(rows)


def _event_id(letter: DeadLetter) -> str | None:
    """A record's identity: the one its change source gave it (`StreamChange.identity`: for a
    change read from Kinesis its change, as each copy of a change has a Kinesis sequence number of
    its own: one dead letter for all of them), else its eventID."""
    if letter.identity:
        return letter.identity
    record = letter.record
    event_id = record.get("eventID") if isinstance(record, dict) else None
    return str(event_id) if event_id else None


def pending(conn: sa.Connection, source: str | None = None, ids: list[int] | None = None, *,
            newest: int | None = None) -> list[Any]:  # fmt: skip
    """The letters not redriven yet, oldest first; `newest=N`: the N newest, newest first."""
    import sqlalchemy as sa

    from hybridsync.sql.schema import dead_letters

    query = sa.select(dead_letters).where(dead_letters.c.redriven_at.is_(None))
    query = (
        query.order_by(dead_letters.c.id.desc()).limit(newest)
        if newest
        else query.order_by(dead_letters.c.id)
    )
    if source:
        query = query.where(dead_letters.c.source == source)
    if ids:
        query = query.where(dead_letters.c.id.in_(ids))
    return list(conn.execute(query))


def mark_redriven(conn: sa.Connection, ids: list[int]) -> None:
    import sqlalchemy as sa

    from hybridsync.sql.schema import dead_letters

    if ids:
        conn.execute(
            dead_letters.update().where(dead_letters.c.id.in_(ids)).values(redriven_at=sa.func.now())
        )


def report(metrics: Any, logger: Any, letters: list[DeadLetter]) -> None:
    """What every consumer says about its dead letters: the alarmed metric and one log line each."""
    from aws_lambda_powertools.metrics import MetricUnit

    metrics.add_metric(DEAD_LETTER_METRIC, MetricUnit.Count, len(letters))
    for letter in letters:
        # which record: a stream record's eventID, or an outbox row's id
        names = {k: letter.record[k] for k in ("eventID", "outbox_id") if k in letter.record}
        logger.warning("dead letter", extra={"reason": letter.reason, **names})
