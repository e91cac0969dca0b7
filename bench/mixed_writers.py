"""Mixed writers: the engine's own writes and plain SDK writes interleaved on the same keys, through
the local pipeline; the throughput of each mix, then drift and the aggregates against a recount.

Three mixes in one run, one after the other (after 5 s of both writers, unmeasured: a warm-up),
each on orders of its own, through one running app (the synthesized app as `hybridsync up` runs
it: every stream mapping, the functions in their worker processes; no batching windows, so a drain
takes seconds):

  engine  orders and their lines placed, edited, shipped, cancelled, deleted and placed again by
          two writers, every change through hybridsync.dynamodb.writes (the entity tag, a version from the
          clock, the write conditional on the version read)
  plain   the same changes by two writers of a service that knows nothing of hybridsync, with
          boto3: PutItem, UpdateItem (`SET Quantity = Quantity + :d`, a status change with the
          index attributes it moves) and DeleteItem with neither a tag nor a version, and
          DynamoDBMapper-style saves and deletes with a counter `Version` (1, 2, 3, ...; an item
          deleted and made again starts at 1 again)
  mixed   one writer of each kind at once on the same orders: every key written by both

Each mix writes in turns (four rounds, the mixes' order rotating each round: the machine and the
emulator speed up over the first minute, so a mix measured only first ran at half the rate). Per
mix: changes per second (a change is an order placed with its lines, a line edited, an order
shipped, cancelled or reopened with its lines, deleted, or placed again) and items written per
second while the pipeline consumes, and the longest the pipeline took to catch up after a turn.
Then, over everything: reconcile's drift row by row (must be 0), each mix's aggregates against a clean
recount of its items (must be equal), the index keys every writer left (0 out of date), the dead
letters (0) and what the write-back settled by reading the table (`WriteBackItemsRead`, from the
function's metrics). `engine_api_fallbacks` counts engine writes that `hybridsync.dynamodb.writes` could not
make over an item a plain writer left without a version (a KeyError: 34 of 488 in a smoke run
before 678dd35 fixed it; 0 since); such a change is then made with `hybridsync.dynamodb.store`'s guarded
put or delete instead.

Prints a table, then one JSON line (`mixes`, per mix `<mix>_changes_per_s`, `<mix>_items_per_s`,
`<mix>_drain_s`, `caught_up`, `mixed_vs_engine_ratio`, `plain_vs_engine_ratio`, `drift`,
`aggregates_equal_recount`, ...). The ratios compare writers sharing one machine with the
pipeline: the engine's write reads the item first (a consistent GetItem per write), a bare PutItem
does not, so they say what a writer costs, not how fast the pipeline is.

With `--shards N` the streams are shaped as production's (N shards, each sealed and continued by a
child every few seconds): a key's records then span a parent shard and its child, which AWS reads
parent first; `--duplicate P` delivers batches twice (replays, at the rows' own positions).
Either may make the write-back settle a change by reading its item (`write_back_items_read`).

Usage: python bench/mixed_writers.py [--quick | --smoke] [--seconds N] [--seed N] [--shards N]
       [--duplicate P] [--assembly DIR]
  (default 60 s per mix; --quick: 20 s; --smoke: 3 s, seconds in all: the same code path and JSON keys)
example: python bench/mixed_writers.py --quick --shards 4 --duplicate 0.1
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local, workloads  # noqa: E402
from hybridsync.dynamodb import store, writes  # noqa: E402
from hybridsync.local.app import LocalApp  # noqa: E402
from hybridsync.local.faults import FaultPlan  # noqa: E402
from hybridsync.local.process import tuned_assembly  # noqa: E402
from hybridsync.local.template import Assembly, synth_if_stale  # noqa: E402
from hybridsync.model import versions  # noqa: E402
from hybridsync.model.declare import Entity  # noqa: E402
from hybridsync.model.errors import Conflict  # noqa: E402
from hybridsync.runtime import db  # noqa: E402
from hybridsync.sync.aggregate import Aggregation  # noqa: E402
from shop.model import CANCELLED, MAX_QUANTITY, MODEL, OPEN, ORDER, ORDER_LINE, SHIPPED  # noqa: E402

MIXES = {"engine": ("engine", "engine"), "plain": ("plain", "plain"), "mixed": ("engine", "plain")}
OPS = {"place": 25, "edit": 30, "ship": 8, "cancel": 7, "delete": 10, "recreate": 10, "touch": 10}
TAG, VERSION = MODEL.names.entity, MODEL.names.version
_to_wire, _from_wire = TypeSerializer().serialize, TypeDeserializer().deserialize


def wire(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _to_wire(v) for k, v in values.items()}


def plain(item: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if item is None else {k: _from_wire(v) for k, v in item.items()}


# --- the writers ------------------------------------------------------------------------------


@dataclass
class PlainWriter:
    """A service that knows nothing of hybridsync, writing the table's design with boto3's client:
    the items' keys and index attributes as the table documents them, never an entity tag, and
    either no version at all (`bare`) or a DynamoDBMapper-style counter `Version` (`mapper`: the
    item read, saved with the counter plus one on the condition that it is still the one read, a
    new or re-made item at 1). A write a racing writer overtook is read and made again."""

    client: Any
    table: str
    counts: Counter[str] = field(default_factory=Counter)

    def _key(self, entity: Entity, values: dict[str, Any]) -> dict[str, Any]:
        return wire(entity.key(values))

    def _item(self, entity: Entity, values: dict[str, Any]) -> dict[str, Any]:
        """The item as the table's design has it: keys and index attributes, no tag, no version."""
        item = entity.item({k: v for k, v in values.items() if k != VERSION} | {VERSION: 1})
        item.pop(TAG, None)
        item.pop(VERSION, None)
        return item

    def _read(self, entity: Entity, values: dict[str, Any]) -> dict[str, Any] | None:
        got = self.client.get_item(TableName=self.table, Key=self._key(entity, values), ConsistentRead=True)
        return plain(got.get("Item"))

    def put(self, entity: Entity, values: dict[str, Any], style: str) -> None:
        if style == "bare":
            self.client.put_item(TableName=self.table, Item=wire(self._item(entity, values)))
            self.counts["bare_put"] += 1
            return
        for _ in range(5):
            stored = self._read(entity, values)
            held = None if stored is None else stored.get(VERSION)
            item = self._item(entity, values)
            sets = {k: v for k, v in item.items() if k not in self._key(entity, values)}
            sets[VERSION] = 1 if held is None else int(held) + 1
            # a mapper REMOVEs the modelled attributes its object holds no value for: index keys left
            removes = [k for k in entity.keys if stored and k in stored and k not in item]
            names = {f"#a{n}": name for n, name in enumerate([*sets, *removes])}
            alias = {name: a for a, name in names.items()}
            expression = "SET " + ", ".join(f"{alias[k]} = :a{n}" for n, k in enumerate(sets))
            if removes:
                expression += " REMOVE " + ", ".join(alias[k] for k in removes)
            values_ = {f":a{n}": v for n, v in enumerate(sets.values())}
            condition = "attribute_not_exists(#v)" if held is None else "#v = :held"
            if held is not None:
                values_[":held"] = held
            try:
                self.client.update_item(
                    TableName=self.table, Key=self._key(entity, values), UpdateExpression=expression,
                    ConditionExpression=condition, ExpressionAttributeNames=names | {"#v": VERSION},
                    ExpressionAttributeValues=wire(values_),
                )  # fmt: skip
                self.counts["mapper_save" if held else "mapper_save_at_1"] += 1
                return
            except self.client.exceptions.ConditionalCheckFailedException:
                self.counts["mapper_raced"] += 1
        self.counts["mapper_gave_up"] += 1

    def delete(self, entity: Entity, values: dict[str, Any], style: str) -> None:
        if style == "bare":
            self.client.delete_item(TableName=self.table, Key=self._key(entity, values))
            self.counts["bare_delete"] += 1
            return
        for _ in range(5):
            stored = self._read(entity, values)
            if stored is None:
                return
            held = stored.get(VERSION)
            guard: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(#v)"}
            if held is not None:
                guard = {
                    "ConditionExpression": "#v = :held",
                    "ExpressionAttributeValues": wire({":held": held}),
                }
            try:
                self.client.delete_item(TableName=self.table, Key=self._key(entity, values),
                                        ExpressionAttributeNames={"#v": VERSION}, **guard)  # fmt: skip
                self.counts["mapper_delete"] += 1
                return
            except self.client.exceptions.ConditionalCheckFailedException:
                self.counts["mapper_raced"] += 1
        self.counts["mapper_gave_up"] += 1

    def add_quantity(self, values: dict[str, Any], delta: int) -> bool:
        """`SET Quantity = Quantity + :d` on a line that exists, within the shop's bounds."""
        try:
            self.client.update_item(
                TableName=self.table, Key=self._key(ORDER_LINE, values),
                UpdateExpression="SET #q = #q + :d",
                ConditionExpression="attribute_exists(#q) AND #q >= :low AND #q <= :high",
                ExpressionAttributeNames={"#q": "Quantity"},
                ExpressionAttributeValues=wire({":d": delta, ":low": 1 - delta,
                                                ":high": MAX_QUANTITY - delta}),
            )  # fmt: skip
        except self.client.exceptions.ConditionalCheckFailedException:
            return False  # gone meanwhile
        self.counts["bare_add"] += 1
        return True

    def set_status(self, entity: Entity, values: dict[str, Any], status: str) -> bool:
        """An UpdateItem of the status and the index attributes it moves (an order leaving OPEN
        leaves the open-orders index), on an item that exists; no tag, no version. The index
        attributes are derived from the item read, so the update holds only if the status and
        those attributes are still the ones read: a writer that overtook it (a CI run saw one
        item left with an index key from before the other writer's change) is read again."""
        table_keys = {a.name for a in entity.table.key_schema()}
        for _ in range(5):
            stored = self._read(entity, values)
            if stored is None:
                return False
            new = self._item(entity, entity.values(stored) | {"Status": status})
            sets = {k: v for k, v in new.items() if k not in table_keys and stored.get(k) != v}
            removes = [k for k in entity.keys if k in stored and k not in new and k not in table_keys]
            if not sets and not removes:
                return True
            read = ["Status", *(k for k in entity.keys if k not in table_keys)]
            names = {f"#a{n}": name for n, name in enumerate(dict.fromkeys([*sets, *removes, *read]))}
            alias = {name: a for a, name in names.items()}
            expression = "SET " + ", ".join(f"{alias[k]} = :a{n}" for n, k in enumerate(sets)) if sets else ""
            if removes:
                expression += " REMOVE " + ", ".join(alias[k] for k in removes)
            held = {f":r{n}": stored[k] for n, k in enumerate(read) if k in stored}
            unchanged = [f"{alias[k]} = :r{n}" if f":r{n}" in held else f"attribute_not_exists({alias[k]})"
                         for n, k in enumerate(read)]  # fmt: skip
            try:
                self.client.update_item(
                    TableName=self.table, Key=self._key(entity, values), UpdateExpression=expression.strip(),
                    ConditionExpression=" AND ".join(["attribute_exists(#k)", *unchanged]),
                    ExpressionAttributeNames=names | {"#k": entity.table.key_schema()[0].name},
                    ExpressionAttributeValues=wire({f":a{n}": v for n, v in enumerate(sets.values())} | held),
                )  # fmt: skip
            except self.client.exceptions.ConditionalCheckFailedException:
                self.counts["bare_raced"] += 1
                continue
            self.counts["bare_status"] += 1
            return True
        self.counts["bare_gave_up"] += 1
        return False


@dataclass
class EngineWriter:
    """The application's writes through the engine: `hybridsync.dynamodb.writes.put` / `delete` (a
    consistent read of the stored version, a write one past it on the condition that it is still
    the one read; over an item stored without a version, that it still has none). Should they
    raise KeyError there again (as before 678dd35; counted in `fallbacks`), the change is made
    with `hybridsync.dynamodb.store`'s guarded put or delete and a version from the clock, as
    `hybridsync.workloads.Writer` makes them."""

    client: Any
    table: str
    counts: Counter[str] = field(default_factory=Counter)

    def put(self, entity: Entity, values: dict[str, Any]) -> None:
        values = {k: v for k, v in values.items() if k != VERSION}
        try:
            writes.put(self.client, self.table, entity, values)
            self.counts["writes_put"] += 1
        except KeyError:
            self.counts["fallbacks"] += 1
            store.put(self.client, self.table, entity, values | {VERSION: versions.next_version()})
        except Conflict:
            self.counts["conflicts"] += 1

    def delete(self, entity: Entity, values: dict[str, Any]) -> None:
        try:
            writes.delete(self.client, self.table, entity, values)
            self.counts["writes_delete"] += 1
        except KeyError:
            self.counts["fallbacks"] += 1
            store.delete(self.client, self.table, entity, values, versions.next_version())
        except Conflict:
            self.counts["conflicts"] += 1


# --- the orders of a mix, and its changes ----------------------------------------------------


@dataclass
class Orders:
    """The orders of one mix, shared by its writers: open ones and deleted ones (to place again)."""

    tag: str
    live: dict[str, dict[str, Any]] = field(default_factory=dict)  # order id -> order values + lines
    deleted: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    n: int = 0

    def new(self, rng: random.Random) -> dict[str, Any]:
        with self.lock:
            self.n += 1
            n = self.n
        customer = f"{self.tag}-c{rng.randrange(20)}"
        order = {"OrderId": f"{self.tag}-o{n}-{rng.randrange(10**6)}", "CustomerId": customer,
                 "CreatedAt": f"2031-05-0{rng.randint(1, 3)}T07:00:00.000Z", "Status": OPEN}  # fmt: skip
        lines = [
            {"LineNo": no, "ProductId": f"{self.tag}-p{rng.randrange(12)}", "Quantity": rng.randint(1, 5),
             "UnitPrice": Decimal(rng.randint(199, 4999)) / 100}
            for no in range(1, rng.randint(1, 3) + 1)
        ]  # fmt: skip
        return {"order": order, "lines": lines}

    def pick(self, rng: random.Random) -> dict[str, Any] | None:
        with self.lock:
            return self.live[rng.choice(list(self.live))] if self.live else None


@dataclass
class Mixer:
    """One writer thread of a mix: seeded changes on the mix's orders, as `kind` writes them."""

    kind: str  # "engine" or "plain"
    orders: Orders
    rng: random.Random
    engine: EngineWriter
    plain: PlainWriter
    changes: Counter[str] = field(default_factory=Counter)
    items: int = 0

    def put(self, entity: Entity, values: dict[str, Any], *, remade: bool = False) -> None:
        self.items += 1
        if self.kind == "engine":
            self.engine.put(entity, values)
        else:  # a re-made item's counter starts at 1 again: the mapper style, most of the time
            style = "mapper" if self.rng.random() < (0.7 if remade else 0.4) else "bare"
            self.plain.put(entity, values, style)

    def delete(self, entity: Entity, values: dict[str, Any]) -> None:
        self.items += 1
        if self.kind == "engine":
            self.engine.delete(entity, values)
        else:
            self.plain.delete(entity, values, self.rng.choice(["mapper", "bare"]))

    def step(self) -> None:
        op = self.rng.choices(list(OPS), weights=list(OPS.values()))[0]
        if getattr(self, f"_{op}")() is not False:
            self.changes[op] += 1

    def _place(self, placed: dict[str, Any] | None = None, remade: bool = False) -> None:
        placed = placed or self.orders.new(self.rng)
        order = placed["order"] | {"Status": OPEN}
        for line in placed["lines"]:
            self.put(ORDER_LINE, order | line, remade=remade)
        total = sum((line["Quantity"] * line["UnitPrice"] for line in placed["lines"]), Decimal(0))
        self.put(ORDER, order | {"Total": total}, remade=remade)
        with self.orders.lock:
            self.orders.live[order["OrderId"]] = placed

    def _edit(self) -> bool | None:
        """A line's quantity: the engine reads the line and writes it whole; the plain writer adds."""
        if not (placed := self.orders.pick(self.rng)):
            return False
        line = self.rng.choice(placed["lines"])
        values = placed["order"] | line
        if self.kind == "plain" and self.rng.random() < 0.6:
            self.items += 1
            return None if self.plain.add_quantity(values, self.rng.choice([1, 2, -1])) else False
        stored = store.get(self.client, self.table, ORDER_LINE.key(values))
        if stored is None:
            return False
        self.put(ORDER_LINE, ORDER_LINE.values(stored) | {"Quantity": self.rng.randint(1, 9)})
        return None

    @property
    def client(self) -> Any:
        return self.engine.client

    @property
    def table(self) -> str:
        return self.engine.table

    def _status(self, status: str) -> bool | None:
        if not (placed := self.orders.pick(self.rng)):
            return False
        lines = [(ORDER_LINE, placed["order"] | line) for line in placed["lines"]]
        for entity, values in [*lines, (ORDER, placed["order"])]:
            if self.kind == "plain" and self.rng.random() < 0.6:
                self.items += 1
                self.plain.set_status(entity, values, status)
                continue
            stored = store.get(self.client, self.table, entity.key(values))
            if stored is not None:
                self.put(entity, entity.values(stored) | {"Status": status})
        return None

    def _ship(self) -> bool | None:
        return self._status(SHIPPED)

    def _cancel(self) -> bool | None:
        return self._status(CANCELLED)

    def _touch(self) -> bool | None:
        """An order made OPEN again (a cancelled order reinstated): its lines count again."""
        return self._status(OPEN)

    def _delete(self) -> bool | None:
        with self.orders.lock:
            if not self.orders.live:
                return False
            placed = self.orders.live.pop(self.rng.choice(list(self.orders.live)))
            self.orders.deleted.append(placed)
        for line in placed["lines"]:
            self.delete(ORDER_LINE, placed["order"] | line)
        self.delete(ORDER, placed["order"])
        return None

    def _recreate(self) -> bool | None:
        with self.orders.lock:
            if not self.orders.deleted:
                return False
            placed = self.orders.deleted.pop(self.rng.randrange(len(self.orders.deleted)))
        self._place(placed, remade=True)
        return None

    def run(self, until: float) -> None:
        while time.monotonic() < until:
            self.step()


# --- the run ----------------------------------------------------------------------------------


def race(mixers: list[Mixer], until: float) -> None:
    """The mixers' writer threads at once, until `until` (monotonic)."""
    threads = [threading.Thread(target=m.run, args=(until,), daemon=True) for m in mixers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def write_back_metrics(logs: Path) -> Counter[str]:
    """The write-back's metrics summed from its function's log (embedded metric format lines)."""
    names = ("WriteBackApplied", "WriteBackUnchanged", "WriteBackItemsRead", "WriteBackUnplaced")
    total: Counter[str] = Counter()
    for log in logs.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"_aws"' in line and '"WriteBack' in line:
                try:
                    document = json.loads(line)
                except ValueError:
                    continue
                for name in names:
                    value = document.get(name)
                    total[name] += int(sum(value) if isinstance(value, list) else value or 0)
    return total


def dead_letters(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM dead_letters")).scalar_one()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20 s per mix (default 60 s)")
    parser.add_argument("--smoke", action="store_true", help="3 s per mix: seconds in all")
    parser.add_argument("--seconds", type=float, help="seconds of writes per mix")
    parser.add_argument("--seed", type=int, help="the writers' seed (default: a fresh one, printed)")
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="streams as production's (hybridsync.local.dynamodb.models): N shards, each sealed and "
        "continued by a child every --shard-lifetime s (default 1: DynamoDB Local's own)",
    )
    parser.add_argument("--shard-lifetime", type=float, default=5, help="seconds (default 5; with --shards)")
    parser.add_argument(
        "--duplicate", type=float, default=0, help="the odds each stream delivery is made twice (default 0)"
    )
    parser.add_argument("--assembly", type=Path, help="a synthesized app (default: cdk.out)")
    args = parser.parse_args()
    seconds = args.seconds or (3 if args.smoke else 20 if args.quick else 60)
    seed = args.seed or random.randrange(1, 2**31)
    assembly_dir = args.assembly or synth_if_stale(ROOT / "cdk.out")
    state = workloads.scratch("bench-mixed-")
    assembly_dir = tuned_assembly(assembly_dir, state / "assembly", MaximumBatchingWindowInSeconds=0)
    run = f"mw{seed % 10_000:04d}"
    figures: dict[str, Any] = {"seed": seed, "seconds_per_mix": seconds, "shards": args.shards,
                               "duplicate": args.duplicate}  # fmt: skip
    counts: Counter[str] = Counter()
    with local.start(state, tables=False) as stack:
        engine = db.create_engine(stack.database_url)
        sharded = {"shards": args.shards, "shard_lifetime_s": args.shard_lifetime} if args.shards > 1 else {}
        plan = FaultPlan(seed=seed, duplicate=args.duplicate) if args.duplicate else None
        app = LocalApp(Assembly.load(assembly_dir), **stack.endpoints(), state_dir=state / "app",
                       prefix="mixed", faults=plan, **sharded)  # fmt: skip
        app.start(http_port=None, schedules=False)
        table = app.table_names["main"]
        mappings = lambda: app.status()["mappings"]  # noqa: E731
        # warm-up, unmeasured: the emulator's JVM and the functions' first batches, so that the first
        # mix is not the one paying for them
        warm = Orders(f"{run}w")
        race([Mixer(kind, warm, random.Random(seed - i), EngineWriter(app.client, table),
                    PlainWriter(app.client, table)) for i, kind in enumerate(("engine", "plain"))],
             time.monotonic() + (1 if args.smoke else 5))  # fmt: skip
        workloads.wait_caught_up(mappings, engine, timeout_s=60)
        mixers: dict[str, list[Mixer]] = {}
        for n, (mix, kinds) in enumerate(MIXES.items()):
            orders = Orders(f"{run}{mix[0]}")
            mixers[mix] = [
                Mixer(kind, orders, random.Random(seed * 10 + n * 2 + i), EngineWriter(app.client, table),
                      PlainWriter(app.client, table))
                for i, kind in enumerate(kinds)
            ]  # fmt: skip
            for mixer in mixers[mix]:  # every order known to both writers before they race on them
                for _ in range(5):
                    mixer._place()
                mixer.items = 0  # measured from here
        workloads.wait_caught_up(mappings, engine, timeout_s=60)
        # rounds, each mix's turn in a rotating order, so that none is measured only early (the
        # machine and the emulator speed up for a minute or more: the first mix ran at half the rate)
        rounds = 1 if args.smoke else 4
        wrote_s: Counter[str] = Counter()
        drain_s: dict[str, float] = {mix: 0.0 for mix in MIXES}
        caught_up = True
        for r in range(rounds):
            for mix in [*MIXES][r % len(MIXES) :] + [*MIXES][: r % len(MIXES)]:
                started = time.monotonic()
                race(mixers[mix], started + seconds / rounds)
                wrote_s[mix] += time.monotonic() - started
                stopped = time.monotonic()
                caught_up &= workloads.wait_caught_up(mappings, engine, timeout_s=180, pause_s=0.25)
                drain_s[mix] = max(drain_s[mix], time.monotonic() - stopped)
        print(f"{'mix':<7} {'writers':<14} {'changes':>8} {'changes/s':>10} {'items/s':>8} {'drain s':>8}")
        for mix, kinds in MIXES.items():
            changes = sum(sum(m.changes.values()) for m in mixers[mix])
            items = sum(m.items for m in mixers[mix])
            for m in mixers[mix]:
                counts += m.engine.counts + m.plain.counts
                counts += Counter({f"{mix}_{op}": k for op, k in m.changes.items()})
            rate, item_rate = changes / wrote_s[mix], items / wrote_s[mix]
            figures |= {f"{mix}_changes": changes, f"{mix}_changes_per_s": round(rate, 1),
                        f"{mix}_items_per_s": round(item_rate, 1),
                        f"{mix}_drain_s": round(drain_s[mix], 1)}  # fmt: skip
            print(f"{mix:<7} {' + '.join(kinds):<14} {changes:>8,} {rate:>10.1f} {item_rate:>8.1f} "
                  f"{drain_s[mix]:>8.1f}", flush=True)  # fmt: skip
        figures["caught_up"] = caught_up
        verdict = workloads.verify(app.client, app.table_names, engine, MODEL,
                                   keep=lambda key: str(key[1]).startswith(run))  # fmt: skip
        aggregation = Aggregation(MODEL)
        items = verdict.items[table]
        for mix in MIXES:
            keep = lambda key, tag=f"{run}{mix[0]}-": str(key[1]).startswith(tag)  # noqa: E731
            stored, clean = aggregation.stored(items, keep), aggregation.recount(items, keep)
            figures[f"{mix}_aggregates"] = len(clean)
            figures[f"{mix}_aggregates_equal_recount"] = stored == clean and len(clean) > 0
        wrote = [i for i in items if str(i.get("OrderId", "")).startswith(run)]
        metrics = write_back_metrics(state / "app" / "logs")
        status = app.status()
        letters = dead_letters(engine)
        app.stop()
        engine.dispose()
    engine_rate = figures["engine_changes_per_s"]
    figures |= {
        "mixes": list(MIXES),
        "plain_vs_engine_ratio": round(figures["plain_changes_per_s"] / engine_rate, 2),
        "mixed_vs_engine_ratio": round(figures["mixed_changes_per_s"] / engine_rate, 2),
        "drift": verdict.drift,
        "rows_checked": sum(d.checked for d in verdict.drifts),
        "aggregates": len(verdict.recounted),
        "aggregates_equal_recount": verdict.aggregates_equal
        and all(figures[f"{mix}_aggregates_equal_recount"] for mix in MIXES),
        "index_keys_out_of_date": verdict.index_keys_out_of_date,
        "dead_letters": letters,
        "failed_batches": status.get("failed_batches", 0),
        "items_live": len(wrote),
        "items_untagged": sum(TAG not in i for i in wrote),
        "items_without_version": sum(VERSION not in i for i in wrote),
        "items_counter_version": sum(VERSION in i and int(i[VERSION]) < 1_000_000 for i in wrote),
        "write_back_applied": metrics["WriteBackApplied"],
        "write_back_items_read": metrics["WriteBackItemsRead"],
        "write_back_unplaced": metrics["WriteBackUnplaced"],
        "engine_api_fallbacks": counts["fallbacks"],
        "writes": dict(sorted(counts.items())),
    }
    print(f"drift {figures['drift']} over {figures['rows_checked']:,} rows; aggregates "
          f"{'equal' if figures['aggregates_equal_recount'] else 'NOT equal'} to a recount "
          f"({figures['aggregates']} of them); index keys out of date {figures['index_keys_out_of_date']}; "
          f"dead letters {letters}; items live {len(wrote):,} ({figures['items_untagged']:,} untagged, "
          f"{figures['items_without_version']:,} without a version, {figures['items_counter_version']:,} "
          f"on a counter); write-back read {figures['write_back_items_read']} items to settle; "
          f"engine writes made through store after writes.* raised: {counts['fallbacks']}")  # fmt: skip
    print(json.dumps(figures))
    if figures["drift"] or not figures["aggregates_equal_recount"]:
        workloads.keep(state)  # the app's logs say why
        raise SystemExit(1)


if __name__ == "__main__":
    main()
