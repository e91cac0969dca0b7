"""Chaos: the whole local app under seeded faults, SIGKILLs and PostgreSQL outages while changes
stream in on both sides for minutes; then every check, row by row (the shop's chaos workload,
examples/shop/shop_workloads/chaos.py, says what runs and what is checked).

Prints a table, then one JSON line: changes, faults (count per kind), fault_kinds, lost,
duplicated, stale, drift (each must be 0), bad_input_kinds, lag_p99_s, rss_mb_start, rss_mb_end...
The lag is end to end (a probe written, then found on the other side), outages and kills included,
so it is bounded by them, not by the machine. Memory is the app's over its last life.

The full run writes for 20 minutes (>= 10,000 changes on the 2-core reference machine, whose
embedded DynamoDB serves one request at a time); --quick for 1 minute; --smoke for 12 seconds with
2-second outages (the same code path and JSON keys). Each run draws a seed unless given one: the
JSON names it and the command that replays the run, and a run that finds a loss exits 1 and
keeps its folder (every injected fault logged, replay.json) with each loss named.

Usage: python bench/chaos.py [--quick | --smoke] [--seconds N] [--rate N] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync.local.template import synth_if_stale  # noqa: E402
from shop_workloads import chaos  # noqa: E402
from tests.integration.test_bad_input import bad_requests  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/chaos.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="1 minute of writes (default 20 minutes)")
    parser.add_argument("--smoke", action="store_true", help="12 s of writes, 2 s outages")
    parser.add_argument("--seconds", type=float, help="seconds of writes")
    parser.add_argument("--rate", type=float, default=30, help="attempted changes per second (default 30)")
    parser.add_argument("--outage", type=float, help="seconds PostgreSQL stays down (default 10; --smoke 2)")
    parser.add_argument("--writers", type=int, default=2, help="writer threads, each seeded (default 2)")
    parser.add_argument("--seed", type=int, help="the run's seed (default: a fresh one, printed)")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    figures = chaos.run(
        args.assembly or synth_if_stale(ROOT / "cdk.out"), Path(tempfile.mkdtemp(prefix="bench-chaos-")),
        seconds=args.seconds or (12 if args.smoke else 60 if args.quick else 1200), rate=args.rate,
        outage_s=args.outage or (2 if args.smoke else 10), writers=args.writers,
        seed=args.seed or random.randrange(1, 2**31), bad_requests=bad_requests(),
    )  # fmt: skip
    print(json.dumps(figures))
    if figures["findings"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
