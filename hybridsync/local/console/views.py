"""What the console shows, as HTML fragments rendered here (no build step, no template engine): the
page, and each live section the page's server-sent events replace (`LIVE`). Every value from the
app or the data is escaped."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

from hybridsync.local import report

LIVE = ("diagram", "charts", "letters", "alarms", "entities")  # the page's sections, each an SSE event
CHART_WINDOW_S = 300.0  # the charts show the last five minutes
MAX_DOTS = 2000
OVER = "seconds since the first record of the last 5 minutes"


def page(token: str, tables: list[str], sections: dict[str, str], title: str) -> str:
    """The console: every section rendered once, then kept live by the `/events` stream (htmx's SSE
    extension swaps each section's event into it); the trace box asks `/trace`."""
    # 4xx answers are swapped in too (they say which parameter is wrong), not dropped
    handling = [{"code": "204", "swap": False}, {"code": "[2345]..", "swap": True}]
    config = json.dumps(
        {"includeIndicatorStyles": False, "responseHandling": handling}
    )  # no inline style: CSP
    options = "".join(f"<option>{html.escape(t)}</option>" for t in tables)
    live = {name: f'<div id="{name}" sse-swap="{name}">{sections[name]}</div>' for name in LIVE}
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>hybridsync console: {html.escape(title)}</title>
<meta name="htmx-config" content='{html.escape(config)}'>
<script src="/static/htmx.min.js"></script><script src="/static/sse.min.js"></script>
<link rel="stylesheet" href="/static/console.css"></head>
<body hx-ext="sse" sse-connect="/events">
<h1>hybridsync console</h1><p>{html.escape(title)}, live: every figure here is the running app's, a
second old at most. Nothing here writes to a table but the redrive, which runs what
<code>hybridsync dead-letters redrive</code> runs.</p>
<section><h2>The app</h2>{live["diagram"]}</section>
<section><h2>Throughput and freshness (last 5 minutes)</h2>{live["charts"]}</section>
<section><h2>Where did my change go?</h2>
<form hx-get="/trace" hx-target="#timeline" id="trace-form">
<label>table or entity <select name="table">{options}</select></label>
<label>key <textarea name="key" rows="2" cols="70"
 placeholder="PK=...&#10;SK=..."></textarea></label>
<button type="submit">trace</button>
<small>one ATTR=VALUE per line, as <code>hybridsync trace</code> takes them: the item's key, or an
entity's <code>sql_key</code></small>
</form><div id="timeline"></div></section>
<section><h2>Dead letters</h2><p id="redriven"></p>{live["letters"]}</section>
<section><h2>Entities: items against rows, and drift</h2>{live["entities"]}</section>
<section><h2>Alarms</h2>{live["alarms"]}</section>
<input type="hidden" id="token" name="token" value="{html.escape(token)}">
</body></html>"""


def charts(app: Any, now: float) -> str:
    """Records delivered per second and each record's lag (all mappings), and each direction's
    freshness, over the last five minutes."""
    since = now - CHART_WINDOW_S
    delivered = sorted((at, lag) for stats in app.mapping_stats.values() for at, lag in list(stats.lags)
                       if at >= since)  # fmt: skip
    sampled = delivered[:: max(1, len(delivered) // MAX_DOTS)]  # a page a browser redraws every second
    parts = [
        f"<div><h3>records delivered per second</h3>{report.throughput_chart(delivered, OVER)}</div>",
        f"<div><h3>each record's lag (s from its write)</h3>{report.lag_chart(sampled, OVER)}</div>",
    ]
    for direction, values in app.freshness_values(since).items():
        title = html.escape(report.DIRECTIONS.get(direction, direction))
        parts.append(f"<div><h3>freshness: {title}</h3>{report.freshness_chart(values)}</div>")
    return f'<div class="charts">{"".join(parts)}</div>'


def letters(
    rows: list[Any], count: int, model: Any, physical: dict[str, str], redrivable: tuple[str, ...]
) -> str:
    """The pending dead letters (`rows`: the newest; `count`: all of them), each with its reason,
    the item it names (a link that traces it) and a redrive button for the sources a redrive
    applies. `physical`: physical table name -> the model's."""
    if not count:
        return "<p>no dead letters pending</p>"
    body = []
    for row in rows:
        record = row.record if isinstance(row.record, dict) else {}
        event = record.get("eventName") or record.get("operation") or "?"
        asked = html.escape(json.dumps({"id": str(row.id)}))
        button = (f'<button hx-post="/redrive" hx-vals="{asked}" hx-include="#token" hx-target="#redriven">'
                  "redrive</button>" if row.source in redrivable else "")  # fmt: skip
        cells = [str(row.id), f"{row.created_at:%H:%M:%S}", html.escape(row.source), html.escape(str(event)),
                 _traced(model, physical, record), html.escape(row.reason), button]  # fmt: skip
        body.append(f'<tr id="letter-{row.id}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    everything = (
        '<button hx-post="/redrive" hx-include="#token" hx-target="#redriven" hx-confirm="Redrive every '
        'pending dead letter of the write-back and the drain?">redrive all</button>'
    )
    shown = f", the newest {len(rows)} shown" if len(rows) < count else ""
    return (f"<p>{count} pending{shown} {everything}</p><table><tr><th>id</th>"
            f"<th>at</th><th>consumer</th><th>event</th><th>item</th><th>reason</th><th></th></tr>"
            f"{''.join(body)}</table>")  # fmt: skip


def _traced(model: Any, physical: dict[str, str], record: dict[str, Any]) -> str:
    """The item a letter names, as a link that traces it: a stream record's, by its keys in the
    table whose stream it came from; an outbox row's, by its entity and sql_key (the row's key)."""
    from hybridsync.model.convert import unmarshal

    change = record.get("dynamodb")
    if "outbox_id" in record:
        return _outbox_row(model, record)
    if not isinstance(change, dict) or not isinstance(change.get("Keys"), dict):
        return ""
    try:
        keys = unmarshal(change["Keys"])
    except Exception:  # a record too broken to decode names no item
        return ""
    arn = str(record.get("eventSourceARN", ""))
    table = physical.get(arn.split(":table/")[1].split("/")[0]) if ":table/" in arn else None
    pairs = [f"{k}={v}" for k, v in sorted(keys.items()) if isinstance(v, str | int | float)]
    if table is None or len(pairs) != len(keys):  # another table's, or a binary key: shown only
        return html.escape(" ".join(f"{k}={v!r}" for k, v in sorted(keys.items())))
    return _link(table, pairs)


def _outbox_row(model: Any, record: dict[str, Any]) -> str:
    from hybridsync.sync.outbox import mastered_tables

    shown = f"outbox row {record['outbox_id']}"
    entity = mastered_tables(model).get(record.get("table_name"))
    row_key = record.get("row_key") if isinstance(record.get("row_key"), dict) else {}
    if entity is None or any(entity.field(a).column not in row_key for a in entity.sql_key):
        return html.escape(shown)
    pairs = [f"{a}={row_key[entity.field(a).column]}" for a in entity.sql_key]
    return f"{html.escape(shown)}: {_link(entity.name, pairs)}"


def _link(table: str, pairs: list[str]) -> str:
    from urllib.parse import urlencode

    query = urlencode({"table": table, "key": "\n".join(pairs)})
    link = f'<a href="#timeline" hx-get="/trace?{html.escape(query)}" hx-target="#timeline">'
    return f"{link}{html.escape(' '.join(pairs))}</a>"


def alarms(status: dict[str, dict[str, Any]]) -> str:
    """How many alarms are in each state; those in ALARM, each with its reason and its last state
    changes; the others folded away."""
    if not status:
        return "<p>the app has no alarms</p>"
    states: dict[str, int] = {}
    for alarm in status.values():
        states[alarm["state"]] = states.get(alarm["state"], 0) + 1
    counts = ", ".join(f'<span class="state-{html.escape(s)}">{n} {html.escape(s)}</span>'
                       for s, n in sorted(states.items()))  # fmt: skip
    firing = {name: a for name, a in status.items() if a["state"] == "ALARM"}
    rest = {name: a for name, a in status.items() if a["state"] != "ALARM"}
    shown = _alarm_table(firing) if firing else ""
    return (f"<p>{len(status)} alarms, evaluated locally: {counts}</p>{shown}"
            f"<details><summary>the {len(rest)} others</summary>{_alarm_table(rest)}</details>")  # fmt: skip


def _alarm_table(status: dict[str, dict[str, Any]]) -> str:
    body = []
    for name, alarm in sorted(status.items()):
        history = "<br>".join(f"{html.escape(h['Timestamp'][11:19])} {html.escape(h['HistorySummary'])}"
                              for h in alarm["history"] if h["HistoryItemType"] == "StateUpdate")  # fmt: skip
        body.append(f'<tr><td>{html.escape(name)}</td><td class="state-{html.escape(alarm["state"])}">'
                    f'{html.escape(alarm["state"])}</td><td>{html.escape(alarm["reason"] or "")}</td>'
                    f"<td>{history}</td></tr>")  # fmt: skip
    return ("<table><tr><th>alarm</th><th>state</th><th>reason</th><th>state history (newest first)</th>"
            f"</tr>{''.join(body)}</table>")  # fmt: skip


def entities(figures: dict[str, Any] | None, at: float) -> str:
    """Per entity: items in DynamoDB, live rows in PostgreSQL, and the drift reconcile finds."""
    if figures is None:
        return "<p>counting...</p>"
    counted = datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")
    body = "".join(
        f"<tr><td>{html.escape(e['entity'])}</td><td>{html.escape(e['master'])}</td><td>{e['items']:,}</td>"
        f"<td>{html.escape(e['sql_table'])}</td><td>{e['rows']:,}</td><td>{e['drift']}</td></tr>"
        for e in figures["entities"]
    )
    gaps = "".join(f"<p>{html.escape(g)}</p>" for g in figures["gaps"])
    verdict = "equal to a recount" if figures["aggregates_equal"] else "DIFFERENT from a recount"
    header = "".join(f"<th>{h}</th>" for h in ("entity", "mastered in", "items", "PostgreSQL table",
                                                "live rows", "drift"))  # fmt: skip
    said = (f"counted at {counted} UTC (every {figures['every_s']:g} s): drift <b>{figures['drift']}</b>; "
            f"{figures['aggregates']} aggregates, {verdict}")  # fmt: skip
    return f"<p>{said}</p><table><tr>{header}</tr>{body}</table>{gaps}"


def timeline(events: list[Any], table: str, key: dict[str, str]) -> str:
    """A trace as a timeline: each event's time, kind and what it says."""
    shown = html.escape(f"{table} " + " ".join(f"{k}={v}" for k, v in key.items()))
    if not events:
        return f"<p>nothing of {shown} in the stream, the logs or PostgreSQL</p>"
    items = []
    for event in events:
        said = event.as_json()
        at = said.pop("at")[11:23]
        kind = said.pop("kind")
        text = "  ".join(f"{k}={json.dumps(v, default=str) if isinstance(v, dict | list) else v}"
                         for k, v in said.items() if v is not None)  # fmt: skip
        items.append(f'<li class="{html.escape(kind)}"><code>{html.escape(at)}</code> '
                     f'<span class="kind">{html.escape(kind)}</span> {html.escape(text)}</li>')  # fmt: skip
    return f'<p>{len(events)} events of {shown}</p><ol class="timeline">{"".join(items)}</ol>'


def error(message: str) -> str:
    return f'<p class="error">{html.escape(message)}</p>'
