"""Fuzz: the shop's HTTP API on `hybridsync up` (a process of its own), every route of its OpenAPI
document, with what a hostile or careless client sends; then the pipeline checked downstream
(examples/shop/shop_workloads/fuzz.py says what runs and what is checked).

Prints a table, then one JSON line: requests, server_errors, dropped, schema_violations,
accepted_then_poisoned (each of the last four must be 0), accepted, routes, requests_per_s... The
rate is the local app's on this machine (one function worker per request), not the API's.

The full run sends 20,000 requests; --quick 5,000; --smoke 300 (the same code path and JSON keys).
A run that finds anything exits 1, printing each request that did (a poisoned one with its dead
letter's reason), to send again.

Usage: python bench/fuzz.py [--quick | --smoke] [--requests N] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync.local.template import synth_if_stale  # noqa: E402
from hybridsync.workloads import keep, scratch  # noqa: E402
from shop_workloads import fuzz  # noqa: E402

FINDINGS = ("server_errors", "dropped", "schema_violations", "accepted_then_poisoned")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/fuzz.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="5,000 requests (default 20,000)")
    parser.add_argument("--smoke", action="store_true", help="300 requests")
    parser.add_argument("--requests", type=int, help="how many requests")
    parser.add_argument("--seed", type=int, default=30, help="the fuzzer's seed (default 30)")
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    count = args.requests or (300 if args.smoke else 5_000 if args.quick else 20_000)
    assembly = args.assembly or synth_if_stale(ROOT / "cdk.out")
    work = scratch("bench-fuzz-")
    figures = fuzz.run(assembly, work, requests=count, seed_value=args.seed)
    print(json.dumps(figures))
    if any(figures[name] for name in FINDINGS) or not figures["poison_replayed"]:
        for line in failures(figures):
            print(line, file=sys.stderr)
        keep(work)  # the app's logs and state
        raise SystemExit(1)


def failures(figures: dict) -> list[str]:
    """What a failing run found, one line each, to send again: every example it kept (each poisoned
    request with its dead letter's reason), and a finding it counted but named no request for."""
    lines = [f"FAILED {example}" for example in figures["examples"]]
    for name in FINDINGS:
        named = sum(example.startswith(f"{name}:") for example in figures["examples"])
        if figures[name] and not named:
            lines.append(f"FAILED {name}: {figures[name]} counted, and no request named for them")
    if not figures["poison_replayed"]:
        lines.append(
            "FAILED poison_replayed: the 1e37 order line was not a dead letter, or the next order not counted"
        )
    return lines


if __name__ == "__main__":
    main()
