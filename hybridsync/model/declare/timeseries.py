"""Time series (pattern 22): a table per period, created ahead, lowered when past, archived and
dropped when old."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from hybridsync.model.declare.entities import Entity
from hybridsync.model.declare.tables import Table


class Period(StrEnum):
    DAY = "day"
    MONTH = "month"
    YEAR = "year"

    @property
    def format(self) -> str:  # type: ignore[override]  # strftime's, not str.format (a public name)
        return {"day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}[self.value]

    def label(self, at: datetime) -> str:
        return at.astimezone(UTC).strftime(self.format)


@dataclass(frozen=True, eq=False)
class TimeSeries:
    """A table per period (pattern 22): `<prefix>-<table>-<label>`, e.g. `hybridsync-events-2026-11-22`.
    The table of a period is created `ahead` periods before it starts, with full capacity while it
    is current; once it is past, its capacity is lowered; past `keep` periods it is archived (its
    items copied to S3) and dropped. Provisioned capacity, since lowering it is the point."""

    entity: Entity
    period: Period
    time_attribute: str  # the entity's attribute that places an item in a period (ISO-8601)
    ahead: int = 1
    keep: int = 14
    current_capacity: tuple[int, int] = (25, 25)  # (read, write) units of the current period
    past_capacity: tuple[int, int] = (5, 1)  # of periods past: read-mostly, seldom written

    @property
    def table(self) -> Table:
        return self.entity.table

    def label(self, at: datetime) -> str:
        return self.period.label(at)

    def start_of(self, at: datetime) -> datetime:
        day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return {Period.DAY: day, Period.MONTH: day.replace(day=1), Period.YEAR: day.replace(month=1, day=1)}[
            self.period
        ]

    def step(self, start: datetime, periods: int) -> datetime:
        """The start of the period `periods` after (or before) the one starting at `start`."""
        if self.period is Period.DAY:
            return start + timedelta(days=periods)
        months = start.year * 12 + start.month - 1 + periods * (12 if self.period is Period.YEAR else 1)
        return start.replace(year=months // 12, month=months % 12 + 1)

    def table_name(self, prefix: str, at: datetime) -> str:
        return f"{prefix}-{self.table.name}-{self.label(at)}"

    def label_of(self, table_name: str, prefix: str) -> str | None:
        """The period label of one of this series' tables, None for any other table."""
        head = f"{prefix}-{self.table.name}-"
        label = table_name.removeprefix(head)
        if label == table_name:
            return None
        try:
            datetime.strptime(label, self.period.format)
        except ValueError:
            return None
        return label

    def starts(self, start: datetime, end: datetime) -> list[datetime]:
        """The start of every period that [start, end] touches, oldest first."""
        out, at = [], self.start_of(start)
        while at <= end:
            out.append(at)
            at = self.step(at, 1)
        return out
