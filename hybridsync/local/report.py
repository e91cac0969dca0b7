"""The demo's report as one self-contained HTML page: tables and inline SVG charts, no network needed."""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

WIDTH, HEIGHT, PAD = 640, 220, 40


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


def lag_chart(timeline: list[tuple[float, float]]) -> str:
    """Each delivered record's lag (seconds from its write to its delivery) over the run."""
    if not timeline:
        return "<p>no records delivered</p>"
    start = timeline[0][0]
    xs = [at - start for at, _ in timeline]
    ys = [lag for _, lag in timeline]
    top = max(ys) or 1.0
    parts = _axes("lag over time", f"seconds into the run (0-{xs[-1]:.0f})", "lag s", round(top, 2))
    px = _scale(xs, 0, max(xs) or 1, WIDTH - PAD - 20)
    py = _scale(ys, 0, top, HEIGHT - PAD - 20)
    dot = '<circle cx="{:.1f}" cy="{:.1f}" r="1.6" fill="#3366cc" fill-opacity="0.5"/>'
    parts += [dot.format(PAD + x, HEIGHT - PAD - y) for x, y in zip(px, py, strict=True)]
    return "\n".join([*parts, "</svg>"])


def throughput_chart(timeline: list[tuple[float, float]]) -> str:
    """Records delivered per second of the run."""
    if not timeline:
        return "<p>no records delivered</p>"
    start = timeline[0][0]
    per_second = Counter(int(at - start) for at, _ in timeline)
    seconds = max(per_second) + 1
    top = max(per_second.values())
    parts = _axes("throughput", f"seconds into the run (0-{seconds})", "records/s", top)
    bar = (WIDTH - PAD - 20) / seconds
    for second, count in per_second.items():
        height = count / top * (HEIGHT - PAD - 20)
        parts.append(
            f'<rect x="{PAD + second * bar:.1f}" y="{HEIGHT - PAD - height:.1f}" '
            f'width="{max(bar - 1, 1):.1f}" height="{height:.1f}" fill="#dc3912"/>'
        )
    return "\n".join([*parts, "</svg>"])


def _table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{body}</table>"


def html_report(f: dict[str, Any]) -> str:
    equal = f["aggregates_equal_recount"]
    verdict = "equal to a clean recount" if equal else "DIFFERENT from a clean recount"
    sections = [
        f"<h1>hybridsync local run</h1><p>{f['writes']} writes, {f['seconds']} s; reconcile drift "
        f"<b>{f['drift']}</b>; {f['aggregates']} aggregates, <b>{verdict}</b>; lag p50 {f['lag_p50_s']} s, "
        f"p99 {f['lag_p99_s']} s; {f['throughput_records_s']} records/s delivered.</p>",
        "<h2>lag of each delivered record</h2>" + lag_chart(f["timeline"]),
        "<h2>records delivered per second</h2>" + throughput_chart(f["timeline"]),
        _table("DynamoDB items", ["entity", "items"], [list(i) for i in f["dynamodb_items"].items()]),
        _table("PostgreSQL rows", ["table", "live rows"], [list(i) for i in f["postgresql_rows"].items()]),
        _table(
            "top sellers today",
            ["product", "units", "revenue"],
            [[r["ProductId"], r["Units"], r["Revenue"]] for r in f["top_sellers"]],
        ),
        _table("leaderboard", ["player", "score"], [[r["PlayerId"], r["Score"]] for r in f["leaderboard"]]),
        _table("dead letters", ["consumer", "reason"], [list(d) for d in f["dead_letters"]]),
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
