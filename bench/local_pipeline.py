"""The local pipeline under sustained writes: does it keep up?

Two phases in one run, each on tables of its own in the same embedded services:

  raw       orders with two lines written into DynamoDB as fast as one writer can, nothing consuming
  pipeline  the same writes with the whole synthesized app running (every stream mapping, the
            functions in their worker processes, the HTTP API, the schedules), its batching windows
            as deployed; then the pipeline drains and reconcile checks PostgreSQL row by row

`pipeline_vs_raw_ratio` is the pipeline phase's write rate over the raw one (>= 0.8: running the
pipeline beside the writer costs it little; on 2 cores they share the CPU, so the ratio is
CPU-bound on both sides and travels). Lag is each record's time from its write to its delivery
(batching windows included: 5 s for the write-back, 30 s for the aggregation, as deployed).

Memory: the embedded DynamoDB runs in a process of its own here, so the pipeline's RSS (this
process: pollers, readers, the HTTP API; plus the function workers) is measured apart from the
emulator's, which holds every item and stream record written and so grows with the data. The
pipeline's RSS is sampled every 2 s through the pipeline phase; `rss_mb_mid` is its value halfway,
so growth in the second half (`rss_growth_second_half_mb`) against the first tells a high-water
mark (flat) from a leak (still climbing).

Usage: python bench/local_pipeline.py [--quick | --smoke] [--seconds N] [--assembly DIR]
  (--quick: 10 s per phase; --smoke: 2 s per phase and no batching windows, seconds in all: the same
  code path and JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.process import rss_mb, tuned_assembly  # noqa: E402
from hybridsync.local.template import Assembly, synth_if_stale  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.sync.reconcile import reconcile  # noqa: E402
from hybridsync.workloads import Writer  # noqa: E402
from shop.model import MODEL  # noqa: E402
from shop_workloads.demo import place_order  # noqa: E402


def app_pids(app: LocalApp) -> list[int]:
    workers = [c.process.pid for f in app.functions.values() for c in list(f._idle.queue)]
    return [os.getpid(), *workers]


class Sampler(threading.Thread):
    """The pipeline's RSS and the emulator's, every `every` seconds, until stopped."""

    def __init__(self, app: LocalApp, emulator: int, every: float = 2.0):
        super().__init__(daemon=True)
        self.app, self.emulator, self.every = app, emulator, every
        self.samples: list[tuple[float, float, float, float]] = []  # t, pipeline, workers, emulator
        self.done = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(self.every):
            pids = app_pids(self.app)
            self.samples.append((time.monotonic() - started, rss_mb(pids), rss_mb(pids[1:]),
                                 rss_mb([self.emulator])))  # fmt: skip

    def at(self, seconds: float) -> tuple[float, float, float, float]:
        return min(self.samples, key=lambda s: abs(s[0] - seconds))


def write_for(writer: Writer, seconds: float, tag: str) -> tuple[int, float]:
    """Orders with two lines, back to back, for `seconds`; returns (orders, orders per second)."""
    started, n = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        order = {"OrderId": f"{tag}-o{n}", "CustomerId": f"{tag}-c{n % 50}",
                 "CreatedAt": "2031-05-06T07:00:00.000Z"}  # fmt: skip
        place_order(writer, order, [f"{tag}-p{(n + line) % 30}" for line in (1, 2)], Decimal("9.99"))
        n += 1
    return n, n / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/local_pipeline.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="10 s per phase (default 60 s)")
    parser.add_argument("--smoke", action="store_true", help="2 s per phase, no batching windows: seconds")
    parser.add_argument("--seconds", type=float, help="seconds of writes per phase")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    seconds = args.seconds or (2 if args.smoke else 10 if args.quick else 60)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    assembly_dir = args.assembly or synth_if_stale(ROOT / "cdk.out")
    state = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    if args.smoke:  # nothing waits for a batching window to fill
        assembly_dir = tuned_assembly(assembly_dir, state / "assembly", MaximumBatchingWindowInSeconds=0)
    with local.start(state, tables=False) as stack:  # DynamoDB Local in a process of its own
        assert stack.dynamodb_process is not None, "measured on the embedded DynamoDB Local"
        emulator = stack.dynamodb_process
        engine = db.create_engine(stack.database_url)
        apps = {}
        for phase in ("raw", "pipeline"):
            assembly = Assembly.load(assembly_dir)
            app = LocalApp(assembly, **stack.endpoints(), state_dir=state / phase, prefix=phase)
            app.start(http_port=None, schedules=phase == "pipeline", mappings=phase == "pipeline")
            apps[phase] = app
        pipeline = apps["pipeline"]
        warm = Writer(pipeline.client, pipeline.table_names["main"])
        write_for(warm, 1, "warm")  # cold starts of the functions happen here, not in the measure
        time.sleep(1 if args.smoke else 6)
        raw_orders, raw_rate = write_for(
            Writer(apps["raw"].client, apps["raw"].table_names["main"]), seconds, "r"
        )
        print(f"raw       {raw_orders:>6} orders in {seconds:g} s: {raw_rate:7.1f} orders/s", flush=True)
        sampler = Sampler(pipeline, emulator.pid)
        sampler.start()
        orders, rate = write_for(Writer(pipeline.client, pipeline.table_names["main"]), seconds, "p")
        print(
            f"pipeline  {orders:>6} orders in {seconds:g} s: {rate:7.1f} orders/s (while consuming)",
            flush=True,
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not all(p.stats.caught_up for p in pipeline.pollers):
            time.sleep(0.5)
        sampler.done.set()
        sampler.join()
        _, rss_start, workers_start, emulator_start = sampler.samples[0]
        _, rss_mid, workers_mid, _ = sampler.at(seconds / 2)
        _, rss_end, workers_end, emulator_end = sampler.at(seconds)
        lags = sorted(lag for p in pipeline.pollers for _, lag in p.stats.lags)
        report = reconcile(pipeline.client, pipeline.table_names, engine, MODEL)
        drift = sum(d.total for d in report.values())
        for app in apps.values():
            app.stop()
        engine.dispose()
    result = {
        "seconds_per_phase": seconds,
        "raw_orders_per_s": round(raw_rate, 1),
        "pipeline_orders_per_s": round(rate, 1),
        "pipeline_vs_raw_ratio": round(rate / raw_rate, 3),
        "records_delivered": len(lags),
        "lag_p50_s": round(statistics.median(lags), 2),
        "lag_p99_s": round(lags[int(len(lags) * 0.99)], 2),
        "drift": drift,
        "rss_mb_start": rss_start,
        "rss_mb_mid": rss_mid,
        "rss_mb_end": rss_end,
        "rss_growth_first_half_mb": round(rss_mid - rss_start, 1),
        "rss_growth_second_half_mb": round(rss_end - rss_mid, 1),
        "workers_rss_mb_start": workers_start,
        "workers_rss_mb_mid": workers_mid,
        "workers_rss_mb_end": workers_end,
        "emulator_rss_mb_start": emulator_start,
        "emulator_rss_mb_end": emulator_end,
    }
    print(f"lag p50 {result['lag_p50_s']} s, p99 {result['lag_p99_s']} s over {len(lags)} deliveries; "
          f"drift {drift}; pipeline RSS {rss_start} -> {rss_mid} -> {rss_end} MB (start, halfway, end; "
          f"function workers {workers_start} -> {workers_mid} -> {workers_end}); embedded DynamoDB "
          f"{emulator_start} -> {emulator_end} MB")  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
