"""What watching the app costs: the live console and `hybridsync trace`, on the running app.

One app (the synthesized one, on embedded services), one run, four phases of writes, ABBA:

  unwatched  orders with two lines written into DynamoDB as fast as one writer can, the pipeline
             consuming them, nobody watching
  watched    the same, with the console's page open: a reader of its `/events` stream (what a
             browser's page holds open), so every section is drawn every second

`watched_vs_unwatched_ratio` is the watched phases' write rate over the unwatched ones' (ABBA: the
table grows through the run, so each kind gets an early and a late phase). On 2 cores the console
shares the CPU with the writer, the pipeline and both emulators: the ratio is CPU-bound and travels
as "what one open page takes", not the rates themselves. Then, on the tables the run filled:

  tick_ms        drawing every live section once (the diagram's figures, the charts, the dead
                 letters, the alarms), the median of 5: a page is sent this every second
  recount_s      the entities' recount (every item and live row, reconcile's drift), made apart
                 every 10 s
  trace_s        the trace box's answer for one order line (the stream read from its trim horizon,
                 the functions' log files, PostgreSQL), the median of 3; `log_mb`: the logs it read

Usage: python bench/console.py [--quick | --smoke] [--seconds N] [--assembly DIR]
  (--quick: 8 s per phase; --smoke: 1 s per phase and no batching windows: the same code path and
  JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "shop"))

from hybridsync import local  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.console.server import Console, _entities  # noqa: E402
from hybridsync.local.process import tuned_assembly  # noqa: E402
from hybridsync.local.template import Assembly, synth_if_stale  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.workloads import Writer, scratch, wait_caught_up  # noqa: E402
from shop.model import MODEL, ORDER_LINE  # noqa: E402
from shop_workloads.demo import orders_for  # noqa: E402

CREATED = "2031-05-06T07:00:00.000Z"


class Watcher(threading.Thread):
    """What an open page does: holds the console's event stream and reads every event it sends."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.received, self.done = url, 0, threading.Event()

    def run(self) -> None:
        with urllib.request.urlopen(self.url + "events", timeout=60) as stream:
            while not self.done.is_set():
                line = stream.readline()
                if not line:
                    return
                self.received += len(line)


def median_s(work: Callable[[], object], times: int) -> float:
    taken = []
    for _ in range(times):
        started = time.perf_counter()
        work()
        taken.append(time.perf_counter() - started)
    return statistics.median(taken)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/console.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="8 s per phase (default 30 s)")
    parser.add_argument("--smoke", action="store_true", help="1 s per phase, no batching windows: seconds")
    parser.add_argument("--seconds", type=float, help="seconds of writes per phase")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    seconds = args.seconds or (1 if args.smoke else 8 if args.quick else 30)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    state = scratch("bench-console-")
    assembly = args.assembly or synth_if_stale(ROOT / "cdk.out")
    assembly = tuned_assembly(assembly, state / "assembly", MaximumBatchingWindowInSeconds=0)
    with local.start(state, tables=False) as stack:
        engine = db.create_engine(stack.database_url)
        app = LocalApp(Assembly.load(assembly), **stack.endpoints(), state_dir=state / "app", prefix="watch")
        app.start(http_port=None, schedules=True)
        console = Console(lambda: app, engine, MODEL)
        console.start()
        writer = Writer(app.client, app.table_names["main"])
        orders_for(writer, 1, "warm")  # the functions' cold starts, before anything is measured
        wait_caught_up(lambda: app.status()["mappings"], engine, timeout_s=180)
        rates: dict[str, list[float]] = {"unwatched": [], "watched": []}
        for n, phase in enumerate(("unwatched", "watched", "watched", "unwatched")):
            watcher = Watcher(console.url) if phase == "watched" else None
            if watcher:
                watcher.start()
            orders, rate = orders_for(writer, seconds, f"{phase[0]}{n}")
            wait_caught_up(lambda: app.status()["mappings"], engine, timeout_s=180)
            if watcher:
                watcher.done.set()
            rates[phase].append(rate)
            shown = f", the page received {watcher.received / 1024:.0f} KB" if watcher else ""
            print(f"{phase:<9} {orders:>6} orders in {seconds:g} s: {rate:7.1f} orders/s{shown}", flush=True)
        tick = median_s(lambda: console._draw(app, time.time()), 5)
        recount = median_s(lambda: _entities(app, engine, MODEL), 1)
        key = ORDER_LINE.key({"OrderId": "w1-o0", "CustomerId": "w1-c0", "CreatedAt": CREATED, "LineNo": 1})
        query = {"table": ["main"], "key": ["\n".join(f"{k}={v}" for k, v in key.items())]}
        status, said = console.trace(query)
        assert status == 200 and 'class="row"' in said, said[:500]
        trace = median_s(lambda: console.trace(query), 3)
        log_mb = sum(p.stat().st_size for p in (state / "app" / "logs").glob("*.log")) / 2**20
        items = sum(app.client.describe_table(TableName=t)["Table"]["ItemCount"] for t in app.tables.values())
        console.close()
        app.stop()
        engine.dispose()
    unwatched, watched = statistics.mean(rates["unwatched"]), statistics.mean(rates["watched"])
    result = {
        "seconds_per_phase": seconds,
        "unwatched_orders_per_s": round(unwatched, 1),
        "watched_orders_per_s": round(watched, 1),
        "watched_vs_unwatched_ratio": round(watched / unwatched, 3),
        "items": items,
        "tick_ms": round(tick * 1000, 1),
        "recount_s": round(recount, 2),
        "trace_s": round(trace, 3),
        "log_mb": round(log_mb, 1),
    }
    print(f"watched / unwatched: {result['watched_vs_unwatched_ratio']}x the write rate; a tick draws every "
          f"section in {result['tick_ms']} ms, a recount of {items} items takes {result['recount_s']} s, a "
          f"trace {result['trace_s']} s over {result['log_mb']} MB of logs")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
