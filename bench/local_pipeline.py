"""The local pipeline under sustained writes: does it keep up?

Two phases in one run, each on tables of its own in the same embedded services:

  raw       orders with two lines written into DynamoDB as fast as one writer can, nothing consuming
  pipeline  the same writes with the whole synthesized app running (every stream mapping, the
            functions in their worker processes, the HTTP API, the schedules), its batching windows
            as deployed; then the pipeline drains and reconcile checks PostgreSQL row by row

With `--source both` (the default) the two phases run again, on services of their own, for the app
synthesized with `-c change_source=kinesis` (`--kinesis-assembly`; synthesized when not given):
changes reach the consumers through the local Kinesis stream (DynamoDB's streaming destination,
played by the app) and its enhanced fan-out consumers. `kinesis_vs_dynamodb_ratio` is its pipeline
phase's write rate over the DynamoDB Streams one's, and each source's lag is printed beside the
other's. (On shared services the later source ran on a DynamoDB Local holding the earlier one's
data and stream records, and wrote at a fraction of its rate alone.)

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
                                     [--source both|dynamodb|kinesis] [--kinesis-assembly DIR]
  (--quick: 10 s per phase; --smoke: 2 s per phase and no batching windows, seconds in all: the same
  code path and JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.process import rss_mb, tuned_assembly  # noqa: E402
from hybridsync.local.template import Assembly, synth_if_stale  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.sync.reconcile import reconcile  # noqa: E402
from hybridsync.workloads import Writer, scratch, wait_caught_up  # noqa: E402
from shop.model import MODEL  # noqa: E402
from shop_workloads.demo import orders_for  # noqa: E402


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


def synth_kinesis(out: Path) -> Path:
    """The app synthesized with every streamed table on Kinesis Data Streams for DynamoDB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    command = [str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--quiet", "--no-notices",
               "-c", "change_source=kinesis", "--output", str(out)]  # fmt: skip
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
    return out


def measure(app: LocalApp, tag: str, seconds: float, emulator: int, engine: Any) -> dict[str, Any]:
    """One source's phase: writes while the app consumes them, the drain, its lag and drift."""
    sampler = Sampler(app, emulator)
    sampler.start()
    orders, rate = orders_for(Writer(app.client, app.table_names["main"]), seconds, tag[0])
    print(f"{tag:<9} {orders:>6} orders in {seconds:g} s: {rate:7.1f} orders/s (while consuming)", flush=True)
    wait_caught_up(lambda: app.status()["mappings"], engine, timeout_s=180)
    sampler.done.set()
    sampler.join()
    _, rss_start, workers_start, emulator_start = sampler.samples[0]
    _, rss_mid, workers_mid, _ = sampler.at(seconds / 2)
    _, rss_end, workers_end, emulator_end = sampler.at(seconds)
    report = reconcile(app.client, app.table_names, engine, MODEL)
    return {"rate": rate, "lags": sorted(lag for p in app.pollers for _, lag in p.stats.lags),
            "drift": sum(d.total for d in report.values()), "rss": (rss_start, rss_mid, rss_end),
            "workers": (workers_start, workers_mid, workers_end),
            "emulator": (emulator_start, emulator_end)}  # fmt: skip


def run_source(source: str, assembly_dir: Path, raw_assembly: Path, state: Path, seconds: float,
               smoke: bool) -> tuple[float, dict[str, Any]]:  # fmt: skip
    """On fresh services: raw writes (tables nothing reads, no Kinesis destination) beside the
    source's idle pipeline, then the same writes with it consuming them; (raw orders/s, the
    pipeline's measure)."""
    with local.start(state, tables=False) as stack:  # DynamoDB Local in a process of its own
        assert stack.dynamodb_process is not None, "measured on the embedded DynamoDB Local"
        engine = db.create_engine(stack.database_url)

        def started(phase: str, assembly: Path) -> LocalApp:
            app = LocalApp(
                Assembly.load(assembly), **stack.endpoints(), state_dir=state / phase, prefix=phase
            )
            app.start(http_port=None, schedules=phase != "raw", mappings=phase != "raw")
            return app

        raw, pipeline = started("raw", raw_assembly), started(source, assembly_dir)
        orders_for(Writer(pipeline.client, pipeline.table_names["main"]), 1, "warm")  # cold starts here
        time.sleep(1 if smoke else 6)
        raw_orders, raw_rate = orders_for(Writer(raw.client, raw.table_names["main"]), seconds, "r")
        raw.stop()
        print(f"raw       {raw_orders:>6} orders in {seconds:g} s: {raw_rate:7.1f} orders/s", flush=True)
        run = measure(pipeline, source, seconds, stack.dynamodb_process.pid, engine)
        pipeline.stop()
        engine.dispose()
    return raw_rate, run


def apart(source: str, flags: list[str]) -> dict[str, Any]:
    """This benchmark for one source in a process of its own: its lines shown, its JSON figures."""
    command = [sys.executable, str(Path(__file__).resolve()), *flags, "--source", source]
    ran = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    lines = ran.stdout.strip().splitlines()
    print("\n".join(lines[:-1]), flush=True)
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/local_pipeline.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="10 s per phase (default 60 s)")
    parser.add_argument("--smoke", action="store_true", help="2 s per phase, no batching windows: seconds")
    parser.add_argument("--seconds", type=float, help="seconds of writes per phase")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    parser.add_argument("--source", choices=["both", "dynamodb", "kinesis"], default="both",
                        help="the change source(s) the pipeline reads, side by side with both")  # fmt: skip
    parser.add_argument("--kinesis-assembly", type=Path,
                        help="the app synthesized with -c change_source=kinesis (default: made)")  # fmt: skip
    args = parser.parse_args()
    seconds = args.seconds or (2 if args.smoke else 10 if args.quick else 60)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    assembly_dir = args.assembly or synth_if_stale(ROOT / "cdk.out")
    state = scratch("bench-pipeline-")
    kinesis_dir = None
    if args.source != "dynamodb":
        kinesis_dir = args.kinesis_assembly or synth_kinesis(state / "kinesis.out")
    if args.smoke:  # nothing waits for a batching window to fill
        assembly_dir = tuned_assembly(assembly_dir, state / "assembly", MaximumBatchingWindowInSeconds=0)
        if kinesis_dir is not None:
            kinesis_dir = tuned_assembly(kinesis_dir, state / "kinesis", MaximumBatchingWindowInSeconds=0)
    if args.source == "both":  # each source in a process and on services of its own
        given = [a for a in sys.argv[1:] if a not in ("--source", "both")]
        dirs = ["--assembly", str(args.assembly or ROOT / "cdk.out"), "--kinesis-assembly", str(kinesis_dir)]
        both = [apart(source, [*given, *dirs]) for source in ("dynamodb", "kinesis")]
        result = both[0] | {k: v for k, v in both[1].items() if k.startswith("kinesis_")}
        result |= {"sources": ["dynamodb", "kinesis"], "drift": both[0]["drift"] + both[1]["drift"],
                   "kinesis_vs_dynamodb_ratio": round(both[1]["kinesis_orders_per_s"]
                                                      / both[0]["dynamodb_orders_per_s"], 3)}  # fmt: skip
        print(f"kinesis / dynamodb streams: {result['kinesis_vs_dynamodb_ratio']}x the write rate; lag p50 "
              f"{result['kinesis_lag_p50_s']} s vs {result['dynamodb_lag_p50_s']} s, p99 "
              f"{result['kinesis_lag_p99_s']} s vs {result['dynamodb_lag_p99_s']} s")  # fmt: skip
        print(json.dumps(result))
        return
    source = args.source
    raw_rate, first = run_source(source, kinesis_dir if source == "kinesis" else assembly_dir, assembly_dir,
                                 state, seconds, args.smoke)  # fmt: skip
    runs, raws, measured = {source: first}, {source: raw_rate}, [source]
    rate, lags = first["rate"], first["lags"]
    rss_start, rss_mid, rss_end = first["rss"]
    workers_start, workers_mid, workers_end = first["workers"]
    emulator_start, emulator_end = first["emulator"]
    drift = sum(run["drift"] for run in runs.values())
    result = {
        "seconds_per_phase": seconds,
        "raw_orders_per_s": round(raw_rate, 1),
        "pipeline_orders_per_s": round(rate, 1),
        "pipeline_vs_raw_ratio": round(rate / raw_rate, 3),
        "records_delivered": len(lags),
        "lag_p50_s": round(statistics.median(lags), 2),
        "lag_p99_s": round(lags[int(len(lags) * 0.99)], 2),
        "drift": drift,
        "sources": measured,
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
    for phase, run in runs.items():
        result[f"{phase}_raw_orders_per_s"] = round(raws[phase], 1)
        result[f"{phase}_orders_per_s"] = round(run["rate"], 1)
        result[f"{phase}_lag_p50_s"] = round(statistics.median(run["lags"]), 2)
        result[f"{phase}_lag_p99_s"] = round(run["lags"][int(len(run["lags"]) * 0.99)], 2)
        result[f"{phase}_drift"] = run["drift"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
