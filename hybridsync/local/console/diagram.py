"""The running app as a diagram: its tables, their streams (DynamoDB's or Kinesis), the event source
mappings, the functions they invoke, PostgreSQL's tables and the outbox, each box with its live
figures. Everything is read from the running app (its template's resources), nothing listed twice;
drawn as inline SVG, server-side."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from hybridsync.local.cloudwatch.service import FRESHNESS  # direction -> the function measuring it

# columns, left to right: where a change starts, how it is carried, who applies it, where it lands
COLUMNS = ("DynamoDB tables", "streams", "event source mappings", "functions", "PostgreSQL")
COLUMN_W, BOX_W, BOX_H, GAP, TOP, LEFT = 200, 176, 58, 14, 28, 30  # LEFT: the back edges' lane


@dataclass
class Box:
    id: str
    column: int
    title: str
    lines: list[str] = field(default_factory=list)
    warn: bool = False  # drawn red: an error, a blocked shard, a dead letter waiting


@dataclass
class Diagram:
    boxes: dict[str, Box] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def add(self, box: Box) -> None:
        self.boxes.setdefault(box.id, box)

    def link(self, source: str, target: str) -> None:
        if source in self.boxes and target in self.boxes and (source, target) not in self.edges:
            self.edges.append((source, target))


def of_app(app: Any, model: Any, status: dict[str, Any], items: dict[str, int], rows: dict[str, int],
           waiting: dict[str, int]) -> Diagram:  # fmt: skip
    """The app's parts and their figures: `status` as `LocalApp.status()` gives it, `items` per
    physical table (DynamoDB's ItemCount), `rows` per PostgreSQL table (live rows), `waiting`: the
    pending dead letters per consumer (the write-back's redden its function, the drain's the outbox)."""
    from hybridsync.model.declare import Side

    d = Diagram()
    for name in app.tables.values():
        d.add(Box(f"table:{name}", 0, name, [_count(items.get(name, 0), "item")]))
    for table, figures in _streams(app, status).items():
        d.add(Box(f"stream:{table}", 1, f"stream of {table}", figures))
        d.link(f"table:{table}", f"stream:{table}")
    for pump in app.pumps.values():
        d.add(Box(f"kinesis:{pump.kinesis_name}", 1, f"Kinesis {pump.kinesis_name}", [f"{pump.put:,} put"]))
        d.link(f"table:{pump.table}", f"kinesis:{pump.kinesis_name}")
    for name, m in status["mappings"].items():
        lines = [f"{m['delivered']:,} delivered, {m['state']}" + (", blocked" if m["blocked"] else ""),
                 f"lag {_count(m['lag_records'], 'record')}, {m['lag_s']:.1f} s"]  # fmt: skip
        d.add(
            Box(f"mapping:{name}", 2, name.split(":")[0], lines, warn=bool(m["blocked"] or m["last_error"]))
        )
        d.link(_source(app, name), f"mapping:{name}")
    outbox = status.get("outbox")
    for name, f in status["functions"].items():
        if name in app.mapping_functions.values() or (name == "SqlSync" and outbox is not None):
            said = [f"{f['invocations']:,} invocations, {f['errors']} errors"]
            letters = (
                waiting.get("write_back", 0)
                if app.functions[name].handler.endswith("write_back.handler")
                else 0
            )
            fresh = next((status["freshness"].get(d) for d, c in FRESHNESS.items() if c == name), None) or {}
            if letters:
                said.append(_count(letters, "dead letter") + " pending")
            elif fresh.get("p50_s") is not None:  # the last 5 minutes' batches, as `hybridsync status`
                said.append(f"freshness p50 {fresh['p50_s']:.2f} s, p99 {fresh['p99_s']:.2f} s")
            d.add(Box(f"function:{name}", 3, name, said, warn=bool(f["errors"] or letters)))
    for name, m in status["mappings"].items():
        d.link(f"mapping:{name}", f"function:{m['function']}")
    for synced in model.synced():
        way = "written back" if synced.master is Side.DYNAMODB else "mastered here"
        d.add(Box(f"sql:{synced.sql_table}", 4, synced.sql_table,
                  [_count(rows.get(synced.sql_table, 0), "row"), f"{synced.name}, {way}"]))  # fmt: skip
    if outbox is not None:
        depth = f"{outbox['depth']:,} waiting, oldest {outbox['oldest_age_s']:.1f} s"
        letters = waiting.get("sql_sync", 0)
        applied = f"{outbox['applied']:,} applied, {letters} dead letters"
        d.add(Box("outbox", 4, "outbox", [depth, applied], warn=bool(letters)))
    _carried(d, app, model, Side)
    return d


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _streams(app: Any, status: dict[str, Any]) -> dict[str, list[str]]:
    """Each table whose DynamoDB stream a mapping reads, and what its stream holds."""
    found: dict[str, list[str]] = {}
    for arn in app.mapping_sources.values():
        if ":table/" in arn and "/stream/" in arn:
            table = arn.split(":table/")[1].split("/")[0]
            figures = status.get("streams", {}).get(table)
            found[table] = [f"{len(figures.get('shards', []))} shards"] if isinstance(figures, dict) and \
                figures.get("shards") else ["DynamoDB Streams"]  # fmt: skip
    return found


def _source(app: Any, mapping: str) -> str:
    arn = app.mapping_sources.get(mapping, "")
    if ":kinesis:" in arn:
        from hybridsync.local.kinesis.models import stream_name

        return f"kinesis:{stream_name(arn)}"
    return f"stream:{arn.split(':table/')[1].split('/')[0]}" if ":table/" in arn else ""


def _carried(d: Diagram, app: Any, model: Any, side: Any) -> None:
    """Where each function puts what it read: by its handler, the engine's own."""
    tables = {logical: app.table_names[logical] for logical in app.table_names}
    for name, function in app.functions.items():
        handler = function.handler.rsplit(".", 2)[-2]
        read = {_source(app, m).split(":", 1)[1] for m, f in app.mapping_functions.items() if f == name}
        if handler == "write_back":
            for synced in model.synced():
                if synced.master is side.DYNAMODB:
                    d.link(f"function:{name}", f"sql:{synced.sql_table}")
        elif handler == "aggregate":  # the aggregates are items of the table it reads
            for table in read:
                d.link(f"function:{name}", f"table:{table}")
        elif handler == "sql_sync":
            d.link("outbox", f"function:{name}")
            for synced in model.synced():
                if synced.master is not side.DYNAMODB:
                    d.link(f"sql:{synced.sql_table}", "outbox")
                    d.link(f"function:{name}", f"table:{tables.get(synced.table.name, '')}")


def svg(d: Diagram) -> str:
    """The diagram drawn: a column per stage, a box per part, an arrow per hop (dashed: back to an
    earlier column, as the aggregates and PostgreSQL's changes go back to DynamoDB, along a lane
    under the boxes and up the left margin)."""
    place: dict[str, tuple[float, float]] = {}
    filled = [0] * len(COLUMNS)
    for box in d.boxes.values():
        place[box.id] = (LEFT + box.column * COLUMN_W, TOP + filled[box.column] * (BOX_H + GAP))
        filled[box.column] += 1
    backs = sum(1 for s, t in d.edges if place[t][0] < place[s][0] - COLUMN_W)
    bottom = TOP + max(filled) * (BOX_H + GAP)
    height, width = bottom + 8 * backs + 16, LEFT + len(COLUMNS) * COLUMN_W + 20
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             'aria-label="the app: tables, streams, mappings, functions, PostgreSQL" class="diagram">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#667"/>'
             "</marker></defs>"]  # fmt: skip
    parts += [f'<text x="{LEFT + i * COLUMN_W}" y="16" class="column">{html.escape(c)}</text>'
              for i, c in enumerate(COLUMNS)]  # fmt: skip
    lanes = {"back": 0, "same": 0}
    for source, target in d.edges:
        parts.append(_arrow(place[source], place[target], bottom, lanes))
    for box in d.boxes.values():
        x, y = place[box.id]
        parts.append(f'<g id="{html.escape(box.id)}" class="box{" warn" if box.warn else ""}">'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/><text x="{x + 8}" '
                     f'y="{y + 17}" class="title">{html.escape(box.title[:28])}</text>')  # fmt: skip
        for n, line in enumerate(box.lines[:2]):
            parts.append(f'<text x="{x + 8}" y="{y + 34 + n * 15}">{html.escape(line[:31])}</text>')
        parts.append("</g>")
    return "".join([*parts, "</svg>"])


def _arrow(start: tuple[float, float], end: tuple[float, float], bottom: float, lanes: dict[str, int]) -> str:
    (x1, y1), (x2, y2) = start, end
    mid1, mid2 = y1 + BOX_H / 2, y2 + BOX_H / 2
    if x2 > x1:  # forward: right side to left side
        path = f"M{x1 + BOX_W},{mid1} C{x1 + BOX_W + 20},{mid1} {x2 - 20},{mid2} {x2},{mid2}"
        return f'<path d="{path}" class="edge" marker-end="url(#arrow)"/>'
    if x2 == x1:  # the same column: out of the right side and back in
        lanes["same"] += 1
        lane = x1 + BOX_W + 4 + 3 * lanes["same"]
        path = f"M{x1 + BOX_W},{mid1} L{lane},{mid1} L{lane},{mid2} L{x2 + BOX_W},{mid2}"
        return f'<path d="{path}" class="edge" marker-end="url(#arrow)"/>'
    if x1 - x2 == COLUMN_W:  # back to the column before: left side to right side
        path = f"M{x1},{mid1} C{x1 - 12},{mid1} {x2 + BOX_W + 12},{mid2} {x2 + BOX_W},{mid2}"
        return f'<path d="{path}" class="edge back" marker-end="url(#arrow)"/>'
    lanes["back"] += 1  # back: down to a lane of its own under the boxes, left, up the margin
    low, margin = bottom + 8 * lanes["back"], LEFT - 6 - 4 * lanes["back"]
    down = x1 + BOX_W / 2
    path = f"M{down},{y1 + BOX_H} L{down},{low} L{margin},{low} L{margin},{mid2} L{x2},{mid2}"
    return f'<path d="{path}" class="edge back" marker-end="url(#arrow)"/>'
