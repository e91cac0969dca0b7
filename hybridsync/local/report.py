"""A run's report: its figures gathered from the running app (both sides, drift, the aggregates
against a recount, dead letters, lag), printed, and as one self-contained HTML page (tables and
inline SVG charts, no network needed)."""

from __future__ import annotations

import html
import statistics
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from hybridsync.local.cloudwatch.alarms import percentiles_s
from hybridsync.model import placing

if TYPE_CHECKING:
    from rich.console import Console

    from hybridsync.local.app import LocalApp
    from hybridsync.model.declare import Model

WIDTH, HEIGHT, PAD = 640, 220, 40
# the directions a change travels, by the function whose `Freshness` measures it
DIRECTIONS = {"write_back": "DynamoDB -> PostgreSQL row", "aggregate": "DynamoDB -> aggregate",
              "sql_sync": "PostgreSQL -> DynamoDB"}  # fmt: skip


def _axes(title: str, x_label: str, y_label: str, y_max: float) -> list[str]:
    return [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{title}">',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - 10}" y2="{HEIGHT - PAD}" stroke="#888"/>',
        f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#888"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle" font-size="12">{x_label}</text>',
        f'<text x="12" y="{HEIGHT / 2}" font-size="12" transform="rotate(-90 12 {HEIGHT / 2})" '
        f'text-anchor="middle">{y_label}</text>',
        f'<text x="{PAD - 4}" y="16" text-anchor="end" font-size="10">{y_max:g}</text>',
        f'<text x="{PAD - 4}" y="{HEIGHT - PAD}" text-anchor="end" font-size="10">0</text>',
    ]


def _scale(values: list[float], low: float, high: float, size: float) -> list[float]:
    span = (high - low) or 1.0
    return [(v - low) / span * size for v in values]


def lag_chart(timeline: list[tuple[float, float]], over: str = "seconds into the run") -> str:
    """Each delivered record's lag (seconds from its write to its delivery) over the run."""
    if not timeline:
        return "<p>no records delivered</p>"
    start = timeline[0][0]
    xs = [at - start for at, _ in timeline]
    ys = [lag for _, lag in timeline]
    top = max(ys) or 1.0
    parts = _axes("lag over time", f"{over} (0-{xs[-1]:.0f})", "lag s", round(top, 2))
    px = _scale(xs, 0, max(xs) or 1, WIDTH - PAD - 20)
    py = _scale(ys, 0, top, HEIGHT - PAD - 20)
    dot = '<circle cx="{:.1f}" cy="{:.1f}" r="1.6" fill="#3366cc" fill-opacity="0.5"/>'
    parts += [dot.format(PAD + x, HEIGHT - PAD - y) for x, y in zip(px, py, strict=True)]
    return "\n".join([*parts, "</svg>"])


def throughput_chart(timeline: list[tuple[float, float]], over: str = "seconds into the run") -> str:
    """Records delivered per second of the run."""
    if not timeline:
        return "<p>no records delivered</p>"
    start = timeline[0][0]
    per_second = Counter(int(at - start) for at, _ in timeline)
    seconds = max(per_second) + 1
    top = max(per_second.values())
    parts = _axes("throughput", f"{over} (0-{seconds})", "records/s", top)
    return "\n".join([*parts, *_bars(per_second, seconds, top, "#dc3912"), "</svg>"])


def _bars(counts: Counter, slots: int, top: int, fill: str) -> list[str]:
    """A bar per slot of a chart's `slots`, as tall as its count against `top`."""
    bar = (WIDTH - PAD - 20) / slots
    return [
        f'<rect x="{PAD + slot * bar:.1f}" y="{HEIGHT - PAD - count / top * (HEIGHT - PAD - 20):.1f}" '
        f'width="{max(bar - 1, 1):.1f}" height="{count / top * (HEIGHT - PAD - 20):.1f}" fill="{fill}"/>'
        for slot, count in counts.items()
    ]


def freshness_chart(values_ms: list[float], bins: int = 20) -> str:
    """A direction's freshness values (each batch's oldest change, from its write until the other side
    held it) as a histogram: batches per bin of seconds, from 0 to the slowest."""
    if not values_ms:
        return "<p>no batches applied</p>"
    seconds = [v / 1000 for v in values_ms]
    top_s = max(seconds) or 1.0
    counts = Counter(min(int(v / top_s * bins), bins - 1) for v in seconds)
    top = max(counts.values())
    parts = _axes("freshness", f"seconds from the write (0-{top_s:.2f})", "batches", top)
    return "\n".join([*parts, *_bars(counts, bins, top, "#109618"), "</svg>"])


def _freshness_sections(freshness: dict[str, list[float]]) -> list[str]:
    """One histogram per direction, its heading with the p50 and p99 the alarms would evaluate."""
    sections = []
    for direction, values in freshness.items():
        p = percentiles_s(values)
        said = f"p50 {p['p50_s']} s, p99 {p['p99_s']} s over {p['count']} batches" if values else "no batches"
        heading = f"freshness {DIRECTIONS.get(direction, direction)} ({direction}): {said}"
        sections.append(f"<h2>{html.escape(heading)}</h2>" + freshness_chart(values))
    return sections


def _table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{body}</table>"


Section = tuple[str, list[str], list[list[Any]]]  # (title, header, rows)


def html_report(f: dict[str, Any], extra: list[Section] = ()) -> str:  # type: ignore[assignment]
    """The run's figures (`writes`, `seconds`, `drift`, `aggregates`, ..., `timeline` of (at, lag)),
    and the `extra` tables a workload adds (its top-N reads, say)."""
    equal = f["aggregates_equal_recount"]
    verdict = "equal to a clean recount" if equal else "DIFFERENT from a clean recount"
    sections = [
        f"<h1>hybridsync local run</h1><p>{f['writes']} writes, {f['seconds']} s; reconcile drift "
        f"<b>{f['drift']}</b>; {f['aggregates']} aggregates, <b>{verdict}</b>; lag p50 {f['lag_p50_s']} s, "
        f"p99 {f['lag_p99_s']} s; {f['throughput_records_s']} records/s delivered.</p>",
        "<h2>lag of each delivered record</h2>" + lag_chart(f["timeline"]),
        "<h2>records delivered per second</h2>" + throughput_chart(f["timeline"]),
        *_freshness_sections(f.get("freshness", {})),
        _table("DynamoDB items", ["entity", "items"], [list(i) for i in f["dynamodb_items"].items()]),
        _table("PostgreSQL rows", ["table", "live rows"], [list(i) for i in f["postgresql_rows"].items()]),
        *(f"<p>{html.escape(gap)}</p>" for gap in f.get("gaps", [])),
        *(_table(*section) for section in extra),
        _table(
            dead_letters_title(f),
            ["consumer", "reason", "run"],
            [[*d, "this"] for d in f["dead_letters"]]
            + [[*d, "earlier, still pending"] for d in f.get("dead_letters_earlier", [])],
        ),
        _table(
            "alarms, evaluated locally",
            ["alarm", "state", "reason"],
            [[name, a["state"], a["reason"]] for name, a in sorted(f.get("alarms", {}).items())],
        ),
    ]
    style = (
        "body{font-family:system-ui,sans-serif;max-width:720px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 8px;"
        "text-align:left;font-size:13px}"
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>hybridsync report</title>'
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>"
    )


def entity_of(model: Model, table: str, item: Mapping[str, Any]) -> str:
    """The entity an item is, placed by its table keys as reconcile and the write-back place it
    (`hybridsync.model.placing`: a tag, if any, only confirming them), so an item a plain writer put
    without the entity tag counts where it belongs. `?`: no entity of the model fits it (another
    writer's item, another template's table) or it cannot be decided."""
    from hybridsync.model.errors import Rejected

    tag = item.get(model.names.entity)
    try:
        keys = {a.name: item.get(a.name) for a in model.table(table).key_schema()}
        entity = placing.place(model, keys, tag, table)
    except (KeyError, Rejected):  # not a table of the model, or keys and tag that decide nothing
        entity = None
    if entity is not None:
        return entity.name
    return "?" if tag is None else str(tag)


def _letter_item(model: Model, record: Any) -> tuple[str, str, dict[str, Any]] | None:
    """The entity a dead-lettered stream record's item is (its keys, as `entity_of`), those keys and
    the item's values; None for a record without keys (an outbox row, a load's)."""
    from hybridsync.model.convert import unmarshal

    change = record.get("dynamodb") if isinstance(record, dict) else None
    if not isinstance(change, dict) or not isinstance(change.get("Keys"), dict):
        return None
    try:
        keys = unmarshal(change["Keys"])
        image = unmarshal(change.get("NewImage") or change.get("OldImage") or {})
    except Exception:  # a record too broken to decode: it names no entity
        return None
    for table in model.tables:
        if {a.name for a in table.key_schema()} == set(keys):
            name = entity_of(model, table.name, image | keys)
            if name != "?":
                return name, repr(sorted(keys.items())), image | keys
    return None


def rowless_letters(conn: sa.Connection, model: Model, waiting: list[Any], since: datetime,
                    held: set[str]) -> list[tuple[tuple[str, str], bool]]:  # fmt: skip
    """The pending write-back letters that explain a gap between items and rows: (entity, the
    item's keys) and whether it is this run's, for each item DynamoDB holds (`held`: its keys) with
    no live row. A letter whose item has its row (written since, or by a later change) or is gone
    explains nothing: counting it named another run's leftovers as this gap's cause."""
    from hybridsync.sql.schema import table_of

    written_back = {e.name: e for e in model.written_back()}  # a letter may name another model's entity
    found = []
    for letter in waiting:
        if letter.source != "write_back" or (placed := _letter_item(model, letter.record)) is None:
            continue
        name, keys, values = placed
        entity = written_back.get(name)
        if entity is None or keys not in held or any(a not in values for a in entity.sql_key):
            continue
        table = table_of(entity)
        match = [table.c[entity.field(a).column] == values[a] for a in entity.sql_key]
        if conn.execute(sa.select(sa.literal(1)).where(*match, sa.not_(table.c.deleted))).first() is None:
            found.append(((name, keys), letter.created_at >= since))
    return found


def gaps(model: Model, items: Mapping[str, int], rows: Mapping[str, int],
         letters: list[tuple[tuple[str, str], bool]]) -> list[str]:  # fmt: skip
    """Each entity mastered in DynamoDB whose items and live rows differ, and why: the pending dead
    letters (of the write-back) of its items that have no row (`rowless_letters`), this run's and
    earlier runs'. Both counts are of the tables as they are, earlier runs' items included, so a
    gap an earlier run left shows with its letters, not with this run's (none)."""
    from hybridsync.model.declare import Side

    found = []
    for synced in model.synced():
        if synced.master is not Side.DYNAMODB:
            continue  # a view is a cache: fewer items than rows is normal
        held, written = items.get(synced.name, 0), rows.get(synced.sql_table, 0)
        if held == written:
            continue
        named: dict[str, bool] = {}  # the items pending write-back letters name -> named this run
        for (entity, keys), recent in letters:
            if entity == synced.name:
                named[keys] = named.get(keys, False) or recent
        said = f"{synced.name}: {held} items, {written} live rows in {synced.sql_table}"
        if named:
            now = sum(named.values())
            said += (
                f"; pending dead letters of the write-back name {len(named)} of its items ({now} of this "
                f"run, {len(named) - now} of earlier runs): no row until fixed and redriven "
                "(`hybridsync dead-letters list`)"
            )
        if held - written != len(named):
            said += "; the rest of the difference: not written back yet, or drift (`hybridsync reconcile`)"
        found.append(said)
    return found


def figures(
    app: LocalApp,
    engine: sa.Engine,
    model: Model,
    *,
    started: float,
    elapsed: float,
    writes: int,
    caught_up: bool,
) -> dict[str, Any]:
    """A run's figures: what each side holds, drift both ways, the aggregates against a clean
    recount, this run's dead letters, every delivered record's lag, and each direction's freshness
    values of the run (ms, from the metrics the alarms read)."""
    from hybridsync import workloads
    from hybridsync.dynamodb import views
    from hybridsync.model.declare import Side
    from hybridsync.sql.deadletters import pending

    verdict = workloads.verify(app.client, app.table_names, engine, model)
    scanned = verdict.items  # the model's tables, read once; any other of the template's read here
    dynamodb = Counter(
        entity_of(model, logical, item)
        for logical, name in app.table_names.items()
        for item in (scanned[name] if name in scanned else workloads.scan(app.client, name))
        if not views.is_missing(item)
    )
    rows = {}
    with engine.connect() as conn:
        for synced in model.synced():
            live = "WHERE NOT deleted" if synced.master is Side.DYNAMODB else ""  # written back: tombstones
            rows[synced.sql_table] = conn.execute(
                sa.text(f"SELECT count(*) FROM {synced.sql_table} {live}")
            ).scalar_one()
        since = datetime.fromtimestamp(started, UTC)  # this run's, and what earlier runs left pending
        waiting = pending(conn)
        held = {  # the keys of every item the model's tables hold, as a letter names its item's
            repr(sorted((a.name, item[a.name]) for a in model.table(logical).key_schema()))
            for logical, name in app.table_names.items() if name in scanned
            for item in scanned[name]
        }  # fmt: skip
        letters_of_gaps = rowless_letters(conn, model, waiting, since, held)
    letters = [(r.source, r.reason) for r in waiting if r.created_at >= since]
    earlier = [(r.source, r.reason) for r in waiting if r.created_at < since]
    delivered = [(at, lag) for stats in app.mapping_stats.values() for at, lag in list(stats.lags)]
    lags = sorted(lag for _, lag in delivered)
    return {
        "caught_up": caught_up,
        "writes": writes,
        "seconds": round(elapsed, 1),
        "dynamodb_items": dict(sorted(dynamodb.items())),
        "postgresql_rows": rows,
        **verdict.summary(),
        "drift_by_entity": {name: d.total for name, d in (verdict.to_sql | verdict.to_views).items()},
        "aggregate_differences": [
            f"{' '.join(map(str, k))}: stored {a}, recount {b}"
            for k, (a, b) in sorted(verdict.aggregate_differences().items(), key=str)
        ][:20],
        "dead_letters": letters,
        "dead_letters_earlier": earlier,
        "gaps": gaps(model, dynamodb, rows, letters_of_gaps),
        "lag_p50_s": round(statistics.median(lags), 3) if lags else None,
        "lag_p99_s": round(lags[int(len(lags) * 0.99)] if lags else 0, 3),
        "records_delivered": len(lags),
        "throughput_records_s": round(len(lags) / elapsed, 1) if elapsed else 0.0,
        "timeline": sorted((round(at, 3), round(lag, 3)) for at, lag in delivered),
        "faults_injected": dict(app.faults.counts) if app.faults else {},
        "failed_batches_stored": app.failed_batches_stored(),
        "alarms": app.alarms.status() if app.alarms else {},
        "freshness": {d: [round(v, 1) for v in vs] for d, vs in app.freshness_values(started).items()},
    }


def dead_letters_title(f: dict[str, Any]) -> str:
    """`dead letters (N)`: this run's; with those earlier runs left pending, which still explain
    items without a row (a replaced item that did not change gives no new record, nor letter)."""
    earlier = len(f.get("dead_letters_earlier", []))
    if not earlier:
        return f"dead letters ({len(f['dead_letters'])})"
    return f"dead letters ({len(f['dead_letters'])} of this run; {earlier} pending from earlier runs)"


def good(f: dict[str, Any]) -> bool:
    """A run that caught up with no drift, aggregates equal to a recount and the model's index keys."""
    return bool(f["caught_up"] and not f["drift"] and f["aggregates_equal_recount"]
                and not f.get("index_keys_out_of_date"))  # fmt: skip


def show(console: Console, f: dict[str, Any], extra: list[Section] = ()) -> None:  # type: ignore[assignment]
    """The figures as a person reads them, with the `extra` tables a workload adds."""
    from rich.table import Table

    sides = Table(title=f"both sides after {f['writes']} writes in {f['seconds']} s")
    sides.add_column("DynamoDB entity"), sides.add_column("items", justify="right")
    sides.add_column("PostgreSQL table"), sides.add_column("live rows", justify="right")
    left, right = list(f["dynamodb_items"].items()), list(f["postgresql_rows"].items())
    for n in range(max(len(left), len(right))):
        a, b = left[n] if n < len(left) else ("", ""), right[n] if n < len(right) else ("", "")
        sides.add_row(str(a[0]), str(a[1]), str(b[0]), str(b[1]))
    console.print(sides)
    for gap in f.get("gaps", []):
        console.print(f"[yellow]{gap}[/yellow]")
    ok = "[green]{}[/green]", "[red]{}[/red]"
    console.print("reconcile drift: " + (ok[0] if f["drift"] == 0 else ok[1]).format(f["drift"]))
    equal = f["aggregates_equal_recount"]
    said = "equal to a clean recount of their sources" if equal else "DIFFERENT from a clean recount"
    console.print(f"aggregates: {f['aggregates']}, " + (ok[0] if equal else ok[1]).format(said))
    for difference in f.get("aggregate_differences", []):
        console.print(f"  [red]{difference}[/red]")
    if "index_keys_out_of_date" in f:
        stale = f["index_keys_out_of_date"]
        said = f"{stale} item(s) not as the model derives them (hybridsync reindex)" if stale else (
            "every item's as the model derives them")  # fmt: skip
        console.print("index keys: " + ok[bool(stale)].format(said))
        for example in f.get("index_keys_examples", []):
            console.print(f"  [red]{example}[/red]")
    for title, header, rows in extra:
        table = Table(title=title)
        for column in header:
            table.add_column(column)
        for row in rows:
            table.add_row(*map(str, row))
        console.print(table)
    earlier = f.get("dead_letters_earlier", [])
    letters = Table(title=dead_letters_title(f),
                    caption="records a consumer refused, each with its reason: their items have no row "
                    "(`hybridsync dead-letters list`)" if f["dead_letters"] or earlier else None)  # fmt: skip
    letters.add_column("consumer"), letters.add_column("reason")
    if earlier:
        letters.add_column("run")
    for source, reason in f["dead_letters"]:
        letters.add_row(source, reason, *(["this"] if earlier else []))
    for source, reason in earlier:
        letters.add_row(source, reason, "earlier, still pending")
    console.print(letters)
    console.print(
        f"pipeline lag p50 {f['lag_p50_s']} s, p99 {f['lag_p99_s']} s over {f['records_delivered']} "
        f"records; {f['throughput_records_s']} records/s delivered"
        + ("" if f["caught_up"] else " [red](did not catch up in time)[/red]")
    )
    if freshness := f.get("freshness"):
        shown = [(d, percentiles_s(v)) for d, v in freshness.items()]
        console.print(
            "freshness (s, each batch's oldest change until the other side held it): "
            + "; ".join(
                f"{d} p50 {p['p50_s']}, p99 {p['p99_s']} ({p['count']} batches)"
                if p["count"]
                else f"{d}: none"
                for d, p in shown
            )
        )
    if alarms := f.get("alarms"):
        firing = sorted(name for name, a in alarms.items() if a["state"] == "ALARM")
        counts = {state: sum(a["state"] == state for a in alarms.values()) for state in ("OK", "ALARM")}
        unmeasured = len(alarms) - sum(counts.values())
        console.print(
            f"alarms: {counts['ALARM']} in ALARM, {counts['OK']} OK, {unmeasured} not measured locally "
            f"(DynamoDB, RDS Proxy, Aurora metrics; periods as deployed: "
            f"a dead letter alarms once its 5-minute period is complete; `hybridsync status`)"
            + (f": {', '.join(firing)}" if firing else "")
        )
    if f["faults_injected"]:
        injected = ", ".join(f"{kind} {n}" for kind, n in sorted(f["faults_injected"].items()))
        console.print(
            f"faults injected into stream deliveries: {injected}; "
            f"failed batches stored in the failure bucket: {f['failed_batches_stored']}"
        )
