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

The writer mix: the shop's chaos changes (its engine's writes, examples/shop/shop_workloads/chaos.py)
and, beside them, a service writing the same table with plain boto3 (bench/mixed_writers.py's
PlainWriter): orders and lines with neither an entity tag nor a version, or with a
DynamoDBMapper-style counter Version that starts at 1 again when an item is deleted and made again,
placed, edited (`SET Quantity = Quantity + :d`), shipped, cancelled, reopened, deleted and made
again; and the same service touching the engine's own open orders' lines (an UpdateItem that keeps
their tag and version, or a mapper save that counts on from the engine's version). About one
change in five is a plain writer's (`plain_*` in changes_by_kind); `--no-plain-writers` runs the
shop's mix alone. Every check is unchanged: drift 0, the aggregates exact, nothing lost.

DynamoDB Local and moto server are the run's own, unless DYNAMODB_ENDPOINT and AWS_ENDPOINT name
ones already running (as tests/reliability/test_chaos.py shares one pair between its two runs);
PostgreSQL is always its own (the run stops it).

Usage: python bench/chaos.py [--quick | --smoke] [--seconds N] [--rate N] [--seed N] [--no-plain-writers]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.mixed_writers import EngineWriter, Mixer, Orders, PlainWriter  # noqa: E402
from hybridsync.dynamodb import store  # noqa: E402
from hybridsync.local.template import synth_if_stale  # noqa: E402
from hybridsync.model.convert import unmarshal  # noqa: E402
from hybridsync.runtime import aws  # noqa: E402
from hybridsync.workloads import keep, scratch  # noqa: E402
from shop.model import MAX_QUANTITY, ORDER, ORDER_LINE  # noqa: E402
from shop_workloads import chaos  # noqa: E402
from tests.integration.test_bad_input import bad_requests  # noqa: E402

# a service's plain writes beside the shop's (about one change in five); `plain_touch` writes the
# shop's own open orders' lines
PLAIN_OPS = {"plain_place": 6, "plain_edit": 5, "plain_status": 4, "plain_delete": 2, "plain_recreate": 2,
             "plain_touch": 5}  # fmt: skip
PLAIN_GENERATORS: list[MixedGenerator] = []  # this run's, for their plain writers' counts


@dataclass
class MixedGenerator(chaos.Generator):
    """The shop's chaos writer and a plain writer of the same service, one seeded thread: the plain
    writer's orders are its own (customers and products `x-<tag>pl-...`, so the aggregates kept
    by the checks count them), its touches land on the shop's open orders."""

    mixer: Mixer | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.rng.getrandbits(64))
        self.mixer = Mixer("plain", Orders(f"x-{self.tag}pl"), rng, EngineWriter(self.client, self.table),
                           PlainWriter(self.client, self.table))  # fmt: skip
        PLAIN_GENERATORS.append(self)

    ops: ClassVar[dict[str, int]] = chaos.OPS | PLAIN_OPS  # the shop's changes and the plain ones

    @property
    def service(self) -> Mixer:
        assert self.mixer is not None
        return self.mixer

    def _plain_place(self) -> None:
        self.service._place()

    def _plain_edit(self) -> bool | None:
        return self.service._edit()

    def _plain_status(self) -> bool | None:
        return self.service.rng.choice([self.service._ship, self.service._cancel, self.service._touch])()

    def _plain_delete(self) -> bool | None:
        return self.service._delete()

    def _plain_recreate(self) -> bool | None:
        return self.service._recreate()

    def _plain_touch(self) -> bool | None:
        """A line of one of the shop's open orders, changed by the plain writer: `SET Quantity =
        Quantity + :d` (its tag and version left as they are), or a mapper's save of the whole line
        with the version one past the engine's."""
        if not (order := self._pick()):
            return False
        line = self._line_of(order, self.rng.randint(1, self.live[order]))
        if line is None:
            return False
        if self.rng.random() < 0.5:
            return None if self.service.plain.add_quantity(line, self.rng.choice([1, -1])) else False
        quantity = min(MAX_QUANTITY, max(1, int(line["Quantity"]) + self.rng.choice([1, 2, -1])))
        self.service.plain.put(ORDER_LINE, ORDER_LINE.values(line) | {"Quantity": quantity}, "mapper")
        return None

    def _line_of(self, order_id: str, line_no: int) -> dict[str, Any] | None:
        """The shop's line, found through its order's header in the customer's collection."""
        customer = self.placed[order_id][0]
        pages = store.pages(
            self.client, "query", TableName=self.table, ConsistentRead=True,
            KeyConditionExpression="PK = :pk", FilterExpression="OrderId = :o AND LineNo = :n",
            ExpressionAttributeValues={":pk": {"S": ORDER.key_value("PK", {"CustomerId": customer})},
                                       ":o": {"S": order_id}, ":n": {"N": str(line_no)}},
        )  # fmt: skip
        found = [i for page in pages for i in page["Items"]]
        return unmarshal(found[0]) if found else None


def shared_emulators() -> dict[str, str] | None:
    """DynamoDB Local and moto server named by the environment (both), to run on instead of our own."""
    names = ("DYNAMODB_ENDPOINT", "AWS_ENDPOINT")
    if not all(os.environ.get(name, "").strip() for name in names):
        return None
    return {name: os.environ[name] for name in names} | {
        "AWS_REGION": aws.LOCAL_REGION, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
    }  # fmt: skip


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
    parser.add_argument("--no-plain-writers", action="store_true", help="the shop's writer mix alone")
    args = parser.parse_args()
    if not args.no_plain_writers:
        chaos.Generator = MixedGenerator  # type: ignore[misc]  # the run makes its writers of this class
    work = scratch("bench-chaos-")
    figures = chaos.run(
        args.assembly or synth_if_stale(ROOT / "cdk.out"), work,
        seconds=args.seconds or (12 if args.smoke else 60 if args.quick else 1200), rate=args.rate,
        outage_s=args.outage or (2 if args.smoke else 10), writers=args.writers,
        seed=args.seed or random.randrange(1, 2**31), bad_requests=bad_requests(),
        emulators=shared_emulators(),
    )  # fmt: skip
    figures["plain_writes"] = dict(
        sorted(sum((g.service.plain.counts for g in PLAIN_GENERATORS), Counter()).items())
    )
    if args.no_plain_writers:
        figures["replay"] += " --no-plain-writers"
    print(json.dumps(figures))
    if figures["findings"]:
        keep(work)  # every injected fault's log and replay.json
        raise SystemExit(1)


if __name__ == "__main__":
    main()
