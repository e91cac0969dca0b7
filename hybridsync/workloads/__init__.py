"""What every workload driving a running app shares (the demo, the chaos run, `up --seed`, the
benchmarks, the contract suite): writes with growing versions, waiting until the pipeline caught
up, whole-table scans, percentiles, and the one verdict on a run: drift both ways and every
declared aggregate against a clean recount. Never shipped to Lambda."""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.dynamodb.reindex import reindex
from hybridsync.model import versions
from hybridsync.model.convert import unmarshal
from hybridsync.model.declare import Entity, Model
from hybridsync.sync import aggregate
from hybridsync.sync.reconcile import Drift, reconcile, reconcile_views

_KEPT: set[Path] = set()


def scratch(prefix: str) -> Path:
    """A folder of its own (under the system's temporary folder) for a run's servers, data and logs,
    removed when the process ends well: a benchmark run again and again leaves nothing behind. It is
    kept, and named on stderr, when an uncaught exception ended the process or `keep` was called."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(_remove, folder)
    return folder


def keep(folder: Path) -> None:
    """Keep a scratch folder past the process's end (a run that found a loss: its logs are the why)."""
    _KEPT.add(folder)


def _remove(folder: Path) -> None:
    if folder in _KEPT or hasattr(sys, "last_value"):  # set when an uncaught exception ended the process
        print(f"kept {folder}", file=sys.stderr)
    else:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Writer:
    """DynamoDB writes as an application makes them: every write of an item with a growing version."""

    client: Any
    table: str
    versions: dict[str, int] = field(default_factory=dict)
    written: int = 0

    def put(self, entity: Entity, values: dict[str, Any]) -> dict[str, Any]:
        slot = f"{entity.name}:{entity.key(values)}"
        self.versions[slot] = versions.next_version(self.versions.get(slot))
        values = values | {entity.names.version: self.versions[slot]}
        store.put(self.client, self.table, entity, values)
        self.written += 1
        return values

    def delete(self, entity: Entity, values: dict[str, Any]) -> None:
        """Delete the item this writer wrote last (a delete's version passes that write's)."""
        version = self.versions[f"{entity.name}:{entity.key(values)}"] + 1
        store.delete(self.client, self.table, entity, values, version)
        self.written += 1


def scan(client: Any, table: str) -> list[dict[str, Any]]:
    """Every item of a table, unmarshalled (strongly consistent: what was acknowledged is there)."""
    pages = store.pages(client, "scan", TableName=table, ConsistentRead=True)
    return [unmarshal(item) for page in pages for item in page["Items"]]


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0 < q < 1) by rank, rounded to 10 ms; 0 for no values."""
    return round(sorted(values)[min(len(values) - 1, int(len(values) * q))], 2) if values else 0.0


def p99(values: list[float]) -> float:
    return percentile(values, 0.99)


def outbox_rows(engine: sa.Engine) -> int | None:
    """Changes waiting in the outbox; None while PostgreSQL is unreachable."""
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM outbox")).scalar_one()
    except sa.exc.OperationalError:
        return None


def wait_caught_up(
    mappings: Callable[[], dict[str, dict[str, Any]] | None],
    engine: sa.Engine,
    *,
    timeout_s: float,
    pause_s: float = 0.5,
    calm: int = 3,
    progress: Callable[[str], None] | None = None,
    outbox: bool = True,
) -> bool:
    """Every mapping idle (no lag, not blocked, its stream read after this call began, so what
    was written before the call is counted) and the outbox empty, `calm` times in a row; False at
    the timeout. `mappings()` gives each mapping's status (`lag_records`, `blocked`,
    `read_through`), as `LocalApp.status()["mappings"]` or the status file has them. `outbox=False`:
    the outbox is not waited for (an app whose drain does not run, on a database others share)."""
    since = time.time()
    deadline, seen = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        status, waiting = mappings(), outbox_rows(engine) if outbox else 0
        idle = status is not None and all(
            m["lag_records"] == 0 and not m.get("blocked") and m.get("read_through", 0) >= since
            for m in status.values()
        )
        seen = seen + 1 if idle and waiting == 0 else 0
        if progress:
            lag = ", ".join(f"{name.split(':')[0]} {m['lag_records']}" for name, m in (status or {}).items())
            progress(f"lag {lag or '?'}, outbox {'?' if waiting is None else waiting}")
        if seen >= calm:
            return True
        time.sleep(pause_s)
    return False


Keep = Callable[[aggregate.Key], bool]


@dataclass
class Verdict:
    """What a run left behind, checked: drift both ways, the aggregates against a recount, and
    every item's index keys against what the model derives (`reindex`, as a dry run)."""

    to_sql: dict[str, Drift]
    to_views: dict[str, Drift]
    stored: aggregate.Totals
    recounted: aggregate.Totals
    items: dict[str, list[dict[str, Any]]] = field(repr=False)  # physical table -> its items
    index_keys_examples: list[str] = field(default_factory=list)  # a few items whose index keys
    index_keys_out_of_date: int = 0  # are not the model's (a writer's bug), and how many

    @property
    def drifts(self) -> list[Drift]:
        return [*self.to_sql.values(), *self.to_views.values()]

    @property
    def drift(self) -> int:
        return sum(d.total for d in self.drifts)

    @property
    def aggregates_equal(self) -> bool:
        return self.stored == self.recounted

    def aggregate_differences(self) -> dict[aggregate.Key, tuple[Any, Any]]:
        return aggregate.differences(self.stored, self.recounted)

    def summary(self) -> dict[str, Any]:
        return {
            "drift": self.drift,
            "rows_checked": sum(d.checked for d in self.drifts),
            "aggregates": len(self.stored),
            "aggregates_equal_recount": self.aggregates_equal,
            "index_keys_out_of_date": self.index_keys_out_of_date,
            "index_keys_examples": self.index_keys_examples[:10],
        }


def verify(
    client: Any,
    tables: Mapping[str, str],
    engine: sa.Engine,
    model: Model,
    *,
    keep: Keep = lambda _: True,
    every_row: bool = False,
) -> Verdict:
    """Reconcile both ways (every written-back entity against its rows; every PostgreSQL-mastered
    row against its view, `every_row` when each row came through the outbox), every aggregate
    `keep` admits against a clean recount of its table's items, and every item's index keys."""
    items = {tables[t.name]: scan(client, tables[t.name]) for t in model.tables}
    stored: aggregate.Totals = {}
    recounted: aggregate.Totals = {}
    for logical in sorted({a.table.name for a in model.aggregates}):
        folding = aggregate.Aggregation(model, logical)
        stored |= folding.stored(items[tables[logical]], keep)
        recounted |= folding.recount(items[tables[logical]], keep)
    to_sql = reconcile(client, tables, engine, model)
    to_views = reconcile_views(client, tables, engine, model, every_row=every_row)
    declared = {tables[t.name]: t for t in model.tables}
    keys = [reindex(client, physical, declared[physical], model, listed, dry_run=True)
            for physical, listed in items.items()]  # fmt: skip
    return Verdict(to_sql, to_views, stored, recounted, items, [e for r in keys for e in r.examples],
                   sum(r.out_of_date for r in keys))  # fmt: skip
