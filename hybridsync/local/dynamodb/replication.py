"""The local twin of a DynamoDB global table (version 2019.11.21, multi-Region eventual consistency):
one DynamoDB Local per Region, and a replicator between them with the semantics AWS documents.

- **Asynchronous.** A write is made in one Region's table and replicated to the others later,
  "typically within a second or less" (V2globaltables_HowItWorks.html, "Replication latency"):
  here after `lag_s` (0.3 s by default) from the moment the replicator reads it from its Region's
  stream, which it polls every `poll_s`.
- **Last writer wins**: conflicts resolve "using the modification with the latest internal
  timestamp on a per-item basis" (same page, "Conflict resolution"). The twin's timestamp is the
  moment it reads the write from its Region's stream: a poll after the write, later under load or
  after a stop, so writes to one item in two Regions that close may resolve either way. Every
  replica converges to the same winner.
- **Quick changes merge.** Replication may merge several changes of one item made in quick
  succession (FAQ, bp-global-table-design.prescriptive-guidance.checklist-and-faq.html): what
  reaches another Region is the item's winner when its replication is due, so a version
  superseded within `lag_s` never reaches it.
- **Each Region's stream carries every write**, local or replicated, and a replicated write is
  marked nowhere (same FAQ). Conditional writes evaluate the local replica's item
  (HowItWorks, "Conflict resolution"): each Region is its own DynamoDB Local.
- **Catch-up.** A Region cut off (`partition`) or down (`stop_region`) keeps what was not
  replicated; once back it replicates it, and receives what it missed (HowItWorks, "Availability
  and durability": RPO is the replication delay).
- **TTL.** A TTL deletion "can be done in any Region" and reaches the others as a replicated write
  (bp-global-table-design.prescriptive-guidance.throughput.html). Every Region's DynamoDB Local
  expires items itself; their deletions replicate like any delete, with no identity: TTL deletions
  replicated to other Regions "are not identifiable" in their streams (ttl-expired-items.html).

What it cannot show: replication latency under real load and distance, and MRSC (strong
consistency, its witness). A replicated write the twin applies over a newer local write it has not
read yet briefly overwrites it, and is overwritten in turn (AWS would discard it there): a Region's
stream may show a losing version between two winning ones; every replica still converges.
"""

from __future__ import annotations

import heapq
import json
import logging
import shutil
import statistics
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from botocore.exceptions import EndpointConnectionError

from hybridsync.local import create_table
from hybridsync.local.account import Account
from hybridsync.local.dynamodb import server as dynamodb_local
from hybridsync.local.dynamodb.streams import ShardCursor
from hybridsync.local.dynamodb.tables import create_request
from hybridsync.local.dynamodb.ttl import Expiries, TtlSweeper
from hybridsync.runtime import aws
from hybridsync.streams.records import json_default
from hybridsync.truth import replica_regions

log = logging.getLogger(__name__)
BOTH_IMAGES = "NEW_AND_OLD_IMAGES"  # a replica's stream: the deploy rule replica-stream
LAG_S = 0.3  # AWS: "typically within a second or less"
POLL_S = 0.05
RETRY_S = 0.5  # a write to a Region that did not answer is tried again after this
ECHO_WAIT_S = 5.0  # a replicated write's record not read back by then: written again (a no-op if it is there)
REVIEW_S = 1.0  # how often each Region's items are checked against their winners
Item = dict[str, Any]  # DynamoDB JSON
Key = tuple[str, str]  # table, its key (DynamoDB JSON, canonical)


def canonical(value: Any) -> str:
    """An item (or key) as one string: equal items, equal strings, whatever the order DynamoDB
    gives a set's members in."""
    return json.dumps(_sets_sorted(value), sort_keys=True, default=json_default)


def _sets_sorted(value: Any) -> Any:
    """Sets' members sorted, numbers as DynamoDB compares them (`20.0` is `20`: DynamoDB Local keeps
    an UpdateItem's `20.0` as written, and a PutItem of it reads back `20`)."""
    if isinstance(value, dict):
        return {k: _member(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sets_sorted(v) for v in value]
    return value


def _member(kind: str, value: Any) -> Any:
    if kind == "N":
        return _number(value)
    if kind == "NS":
        return sorted(_number(v) for v in value)
    if kind in ("SS", "BS"):
        return sorted(value, key=str)
    return _sets_sorted(value)


def _number(text: str) -> str:
    try:
        return format(Decimal(text).normalize(), "f")
    except ArithmeticError:
        return text


@dataclass
class Echo:
    """A write the replicator made in a Region, until its record is read back there. `certain`:
    the write answered (else it may not have landed, and is tried again)."""

    stamp: float
    image: str  # canonical
    certain: bool = True
    at: float = field(default_factory=time.monotonic)

    def awaited(self) -> bool:
        """Whether its record is still awaited: it answered, and not so long ago that its record,
        if any, must have been matched to another write of the same item (then it is written again)."""
        return self.certain and time.monotonic() - self.at < ECHO_WAIT_S


@dataclass(frozen=True)
class Version:
    """One write of an item: the replicator's per-item timestamp, its Region, the item (None: deleted)."""

    stamp: float
    region: str
    image: Item | None


class Ledger:
    """What each Region holds of each item, and who wins: the replicator's decisions, without I/O.

    `read(region, key, image)` takes each record of a Region's stream, in its order, and says which
    Regions are now due the item's winner; `pending` what to write there; `applying`/`applied`
    bracket that write; `settled` whether its record was read back."""

    def __init__(self, regions: dict[str, tuple[str, ...]], clock: Callable[[], float] = time.time):
        self.regions, self.clock = regions, clock  # table -> the Regions it has replicas in
        self._last = 0.0
        self.winners: dict[Key, Version] = {}
        self.held: dict[tuple[str, Key], float] = {}  # (Region, item) -> stamp of the version it holds
        self.written: dict[tuple[str, Key], float] = {}  # (Region, item) -> stamp of its last write there
        self._echoes: dict[tuple[str, Key], deque[Echo]] = defaultdict(deque)
        self.local_writes: dict[str, int] = defaultdict(int)
        self.replicated: dict[str, int] = defaultdict(int)
        self.overwritten = 0  # replicated versions a Region's newer write had to win back (see module)

    def stamp(self) -> float:
        self._last = max(self.clock(), self._last + 1e-6)  # strictly increasing: no two writes tie
        return self._last

    def read(self, region: str, key: Key, image: Item | None) -> list[tuple[str, Key]]:
        """A record of `region`'s stream. Returns the (Region, item) pairs now due a replication."""
        echoes, shown = self._echoes[(region, key)], canonical(image)
        mine = next((n for n, echo in enumerate(echoes) if echo.image == shown), None)
        if mine is not None:  # our own replicated write, read back (those before it made no record)
            for _ in range(mine):
                echoes.popleft()
            stamp = self.held[(region, key)] = echoes.popleft().stamp  # its own stamp: never a new write
            # its retries made no record of their own (an unchanged item makes none): a later local
            # write of the same content is a new write, not them
            for echo in [e for e in echoes if e.stamp == stamp]:
                echoes.remove(echo)
        elif (winner := self.winners.get(key)) and canonical(winner.image) == shown:
            self.held[(region, key)] = winner.stamp  # the winner already: written here too, or merged
        else:
            version = Version(self.stamp(), region, image)
            self.winners[key] = version
            self.held[(region, key)] = self.written[(region, key)] = version.stamp
            self.local_writes[region] += 1
        winner = self.winners.get(key)
        if winner is None:
            return []
        due = [
            (other, key) for other in self.regions[key[0]] if self.held.get((other, key), -1.0) < winner.stamp
        ]
        if winner.region == region and (region, key) in due:
            self.overwritten += 1  # a replicated write landed after a newer local one: win it back
        return due

    def pending(self, region: str, key: Key) -> Version | None:
        """The version `region` must be brought to, or None: it holds the winner, or is getting it."""
        winner = self.winners.get(key)
        if winner is None or self.held.get((region, key), -1.0) >= winner.stamp:
            return None
        if any(echo.awaited() and echo.stamp >= winner.stamp for echo in self._echoes[(region, key)]):
            return None  # written already; its record is on its way
        return winner

    def settled(self, region: str, key: Key) -> bool:
        """Whether `region` holds `key`'s winner, its record read back (not merely written)."""
        winner = self.winners.get(key)
        return winner is None or self.held.get((region, key), -1.0) >= winner.stamp

    def applying(self, region: str, key: Key, version: Version) -> None:
        """Before the write: its record may be read before the write call returns. A version
        written again after an answered write whose record never came is one echo; an earlier
        write that got no answer keeps its own (it may have landed: its record may still come)."""
        echoes = self._echoes[(region, key)]
        for echo in [e for e in echoes if e.stamp == version.stamp and e.certain]:
            echoes.remove(echo)
        echoes.append(Echo(version.stamp, canonical(version.image)))

    def applied(self, region: str, key: Key, version: Version, *, recorded: bool | None) -> None:
        """After the write. `recorded`: whether it changed the item (so the stream has a record of
        it); None: no answer, so it may or may not have landed: its record, if one comes, is still
        known as this version's (never a new write), and the write is tried again."""
        echoes = self._echoes[(region, key)]
        mine = next((e for e in reversed(echoes) if e.stamp == version.stamp), None)
        if recorded is None and mine is not None:
            mine.certain = False
        elif recorded is False:  # unchanged: no record will come
            if mine is not None:
                echoes.remove(mine)
            self.held[(region, key)] = max(self.held.get((region, key), -1.0), version.stamp)
        if recorded is not None:
            self.replicated[region] += 1

    def refused(self, region: str, key: Key, version: Version) -> None:
        """The write never reached the Region (its connection refused): no record can come of it, so
        its echo goes (else a later local write of the same content would be taken for it)."""
        echoes = self._echoes[(region, key)]
        for echo in [e for e in echoes if e.stamp == version.stamp]:
            echoes.remove(echo)

    def seed(self, region: str, key: Key, image: Item) -> None:
        """An item copied into a new replica (as AWS fills one from the table): its record is ours."""
        self._echoes[(region, key)].append(Echo(0.0, canonical(image)))
        self.held.setdefault((region, key), 0.0)


@dataclass(frozen=True)
class RegionFault:
    """A Region cut off from the others (`partition`: its clients still reach it) or down (`stop`:
    its DynamoDB Local stopped, then started again with its data), `at_s` after the start, for `for_s`."""

    kind: str
    region: str
    at_s: float
    for_s: float

    KINDS = ("partition", "stop")

    @classmethod
    def parse(cls, text: str) -> list[RegionFault]:
        """`partition=us-west-2@5+3,stop=us-west-2@12+4`: kind=Region@start+seconds, each."""
        plan = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            kind, _, rest = part.partition("=")
            region, _, timing = rest.partition("@")
            at, _, length = timing.partition("+")
            try:
                fault = cls(kind.strip(), region.strip(), float(at), float(length))
            except ValueError:
                raise ValueError(
                    f"{part!r}: write KIND=REGION@START+SECONDS, e.g. stop=us-west-2@10+5"
                ) from None
            if fault.kind not in cls.KINDS:
                raise ValueError(f"{part!r}: a Region fault is {' or '.join(cls.KINDS)}")
            if fault.at_s < 0 or fault.for_s <= 0:
                raise ValueError(f"{part!r}: the start is 0 or later, and the fault lasts more than 0 s")
            plan.append(fault)
        return plan


@dataclass
class Region:
    """One Region of the twin: its DynamoDB Local (kept in `folder` while the app runs, so a stopped
    Region comes back with its data and its stream), on a port of its own."""

    name: str
    folder: Path
    port: int = 0
    process: Any = None
    cut_off: bool = False  # partitioned from every other Region
    stopped: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Its DynamoDB Local, on its port (the same one again after a stop), logging beside its folder."""
        self.port = self.port or dynamodb_local.free_port()
        log_file = self.folder.parent / f"dynamodb-local-{self.name}.log"
        self.process = dynamodb_local.start(self.folder, log=log_file, port=self.port)[1]
        self.stopped = False

    def stop(self) -> None:
        if self.process is not None:
            dynamodb_local.stop(self.process)
        self.process, self.stopped = None, True

    def client(self, service: str = "dynamodb") -> Any:
        # one attempt: a refused connection then means nothing was sent (Replicator._write)
        return aws.client(service, self.endpoint, self.name, retries={"total_max_attempts": 1},
                          connect_timeout=1, read_timeout=10)  # fmt: skip


@dataclass(order=True)
class _Task:
    due: float
    region: str = field(compare=False)
    key: Key = field(compare=False)


class Replicator:
    """Replicates tables between Regions (`regions`: name -> its Region, home first: the one the app
    runs on; `tables`: each table's Regions, home first), until `close()`. `rehome` makes another
    Region home (a failover: local/failover.py)."""

    def __init__(self, regions: dict[str, Region], tables: dict[str, tuple[str, ...]], *,
                 lag_s: float = LAG_S, poll_s: float = POLL_S,
                 clock: Callable[[], float] = time.time):  # fmt: skip
        self.regions, self.tables, self.lag_s, self.poll_s = regions, tables, lag_s, poll_s
        self.ledger = Ledger(tables, clock)
        self._lock = threading.Condition()
        self._tasks: dict[str, list[_Task]] = {name: [] for name in regions}
        self._cursors: dict[tuple[str, str], ShardCursor] = {}
        self._keys: dict[str, list[str]] = {}  # table -> its key attributes
        self._latency: dict[tuple[str, str], list[float]] = defaultdict(list)  # (from, to) -> seconds
        self._reading: dict[str, float] = {}  # Region -> when its streams were last read to their end
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.faults: dict[str, int] = defaultdict(int)  # Region faults injected, by kind
        # TTL in every Region but home (home's is the app's): table -> (its TTL attribute, its keys)
        self.expiring: dict[str, tuple[str, list[str]]] = {}
        self._sweeping: dict[str, threading.Event] = {}  # Region -> set to stop its sweepers
        # (source Region, table, receiving Region, ms) for each write another Region applied: DynamoDB's
        # ReplicationLatency, in the source Region's CloudWatch (the local app's: LocalApp.start)
        self.on_latency: Callable[[str, str, str, float], None] | None = None

    # --- starting --------------------------------------------------------------------------------

    def start(self) -> None:
        """Fill each replica from home (as AWS fills a new replica), then replicate both ways."""
        for table, (home, *others) in self.tables.items():
            client = self.regions[home].client()
            schema = client.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = [k["AttributeName"] for k in schema]
            for name in (home, *others):  # every stream from its end: what is there is settled
                cursor = self._cursor(self.regions[name], table)
                while cursor.page()[0]:
                    pass
            pages = client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            replicas = {name: self.regions[name].client() for name in others}
            for item in (i for page in pages for i in page["Items"]):
                key = (table, self._key_of(table, item))
                for name, replica in replicas.items():
                    self.ledger.seed(name, key, item)
                    replica.put_item(TableName=table, Item=item)
        for name in self.regions:
            self._spawn(self._read, name, f"replica-read-{name}")
            self._spawn(self._apply, name, f"replica-write-{name}")
        for name in list(self.regions)[1:]:
            self._sweep(name)

    def _sweep(self, name: str) -> None:
        """Expire the Region's items (TTL deletes in every Region; each deletion replicates)."""
        self._sweeping[name] = done = threading.Event()
        for table, (attribute, keys) in self.expiring.items():
            if name in self.tables[table]:
                sweeper = TtlSweeper(self.regions[name].client(), table, attribute, keys, Expiries())
                self._spawn(lambda _, s=sweeper: s.run(done), name, f"ttl-{name}-{table}")

    @property
    def home(self) -> str:
        return next(iter(self.regions))

    def rehome(self, name: str) -> None:
        """`name` becomes home, the Region the app runs on (a failover): its TTL becomes the app's,
        and the old home's the replicator's. Replication itself has no home: it goes every way."""
        old = self.home
        if missing := [t for t, names in self.tables.items() if name not in names]:
            raise ValueError(f"{', '.join(missing)} has no replica in {name}")
        with self._lock:
            self.regions = {name: self.regions[name]} | {k: v for k, v in self.regions.items() if k != name}
            self.tables = {t: (name, *[r for r in names if r != name]) for t, names in self.tables.items()}
        self._sweeping.pop(name).set()
        self._sweep(old)

    def _spawn(self, target: Callable[[str], None], region: str, name: str) -> None:
        thread = threading.Thread(target=target, args=(region,), name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _cursor(self, region: Region, table: str) -> ShardCursor:
        if (region.name, table) not in self._cursors:
            client, streams = region.client(), region.client("dynamodbstreams")
            arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
            shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
            self._cursors[(region.name, table)] = ShardCursor(streams, arn, shard, "TRIM_HORIZON")
        return self._cursors[(region.name, table)]

    def _key_of(self, table: str, item: Item) -> str:
        return canonical({name: item[name] for name in self._keys[table]})

    # --- the two loops of each Region ------------------------------------------------------------

    def _read(self, name: str) -> None:
        """Reads the Region's streams, even while it is cut off: its writes keep their timestamps."""
        region = self.regions[name]
        while not self.stopping.wait(self.poll_s):
            began = time.time()
            try:
                for table in (t for t, names in self.tables.items() if name in names):
                    while records := self._cursor(region, table).page()[0]:
                        self._take(name, table, records)
            except Exception as error:  # the Region is down: read again once it is back
                log.debug("reading %s: %s", name, error)
                continue
            with self._lock:
                self._reading[name] = began
                self._lock.notify_all()

    def _take(self, name: str, table: str, records: list[dict[str, Any]]) -> None:
        with self._lock:
            now = time.time()
            for record in records:
                data = record["dynamodb"]
                image = data.get("NewImage") if record["eventName"] != "REMOVE" else None
                for region, key in self.ledger.read(name, (table, canonical(data["Keys"])), image):
                    heapq.heappush(self._tasks[region], _Task(now + self.lag_s, region, key))
            self._lock.notify_all()

    def _apply(self, name: str) -> None:
        """Brings the Region's items to their winners, each when its replication is due."""
        region = self.regions[name]
        client = region.client()
        reviewed = time.monotonic()
        while not self.stopping.is_set():
            with self._lock:
                tasks = self._tasks[name]
                if time.monotonic() - reviewed > REVIEW_S:  # an item no task brings to its winner
                    reviewed = time.monotonic()
                    due = {t.key for t in tasks}
                    for key in self.ledger.winners:
                        if name in self.tables[key[0]] and key not in due and self.ledger.pending(name, key):
                            heapq.heappush(tasks, _Task(time.time(), name, key))
                wait = (tasks[0].due - time.time()) if tasks else self.poll_s
                if wait > 0:
                    self._lock.wait(min(wait, self.poll_s))
                    continue
                task = heapq.heappop(tasks)
                version = self.ledger.pending(name, task.key)
                if version is None:
                    continue
                if region.cut_off or self.regions[version.region].cut_off:
                    heapq.heappush(tasks, _Task(time.time() + self.poll_s, name, task.key))
                    continue
                self.ledger.applying(name, task.key, version)
            recorded, sent = self._write(client, task.key, version)
            with self._lock:
                if sent:
                    self.ledger.applied(name, task.key, version, recorded=recorded)
                else:
                    self.ledger.refused(name, task.key, version)
                if recorded is None:
                    heapq.heappush(tasks, _Task(time.time() + RETRY_S, name, task.key))
                elif version.region != name:  # not a Region winning back its own write
                    seconds = time.time() - version.stamp
                    self._latency[(version.region, name)].append(seconds)
                    if self.on_latency is not None:
                        self.on_latency(version.region, task.key[0], name, seconds * 1000)
                self._lock.notify_all()

    def _write(self, client: Any, key: Key, version: Version) -> tuple[bool | None, bool]:
        """Writes the version: whether it changed the item (None: the Region did not answer), and
        whether the request was sent at all (a refused connection: it cannot have landed)."""
        table, keys = key
        try:
            if version.image is None:
                old = client.delete_item(TableName=table, Key=json.loads(keys), ReturnValues="ALL_OLD")
                return bool(old.get("Attributes")), True
            old = client.put_item(TableName=table, Item=version.image, ReturnValues="ALL_OLD")
            return canonical(old.get("Attributes") or None) != canonical(version.image), True
        except EndpointConnectionError as error:  # a stopped Region: nothing reached it
            log.debug("replicating into %s: %s", client.meta.region_name, error)
            return None, False
        except Exception as error:
            log.debug("replicating into %s: %s", client.meta.region_name, error)
            return None, True

    # --- faults and figures ----------------------------------------------------------------------

    def partition(self, name: str, cut: bool = True) -> None:
        """Cut a Region off from every other (its clients still reach it), or join it back."""
        with self._lock:
            self.regions[name].cut_off = cut
            self._lock.notify_all()

    def stop_region(self, name: str) -> None:
        """The Region's DynamoDB goes down: its clients, and replication, get no answer."""
        self.regions[name].stop()

    def start_region(self, name: str) -> None:
        """The Region comes back, with its data and its stream. Its DynamoDB Local lives as long as
        the calling thread (PR_SET_PDEATHSIG): call it from one that lasts."""
        self.regions[name].start()

    def inject(self, plan: list[RegionFault]) -> None:
        """Run the plan's faults, each at its time from now (a thread of the replicator's)."""
        began = time.monotonic()

        def run(fault: RegionFault) -> None:
            if self.stopping.wait(max(0.0, began + fault.at_s - time.monotonic())):
                return
            cut, restore = {
                "partition": (
                    lambda: self.partition(fault.region),
                    lambda: self.partition(fault.region, False),
                ),
                "stop": (lambda: self.stop_region(fault.region), lambda: self.start_region(fault.region)),
            }[fault.kind]
            cut()
            with self._lock:
                self.faults[fault.kind] += 1
            if not self.stopping.wait(fault.for_s):  # not on the way out: no Region started to stop it
                restore()
            # A restarted DynamoDB Local dies with the thread that started it (PR_SET_PDEATHSIG
            # follows the parent thread, not the process): this one lasts as long as the replicator.
            self.stopping.wait()

        for fault in plan:
            self._spawn(lambda _, f=fault: run(f), fault.region, f"region-{fault.kind}-{fault.region}")

    def settle(self, timeout_s: float = 30.0) -> bool:
        """Waits until every Region holds every item's winner and every stream has been read past
        the moment of the call; whether it did within the timeout."""
        called = time.time()
        deadline = time.monotonic() + timeout_s

        def settled() -> bool:
            read = all(self._reading.get(name, 0.0) > called for name in self.regions)
            return read and all(
                self.ledger.settled(name, key) for key in self.ledger.winners for name in self.tables[key[0]]
            )

        with self._lock:
            while not settled():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, self.poll_s))
        return True

    def delivered(self, source: str, target: str, timeout_s: float = 30.0) -> bool:
        """Waits until `target` holds every write `source` took before the call, or a later winner
        (what a live failover waits for: local/failover.py); whether it did within the timeout."""
        called, deadline = time.time(), time.monotonic() + timeout_s
        taken: dict[Key, float] | None = None  # once the source's stream is read past the call
        with self._lock:
            while True:
                if taken is None and self._reading.get(source, 0.0) > called:
                    taken = {key: stamp for (region, key), stamp in self.ledger.written.items()
                             if region == source and target in self.tables[key[0]]}  # fmt: skip
                if taken is not None:
                    held = self.ledger.held
                    taken = {k: stamp for k, stamp in taken.items() if held.get((target, k), -1.0) < stamp}
                    if not taken:
                        return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, self.poll_s))

    def _behind(self, region: str) -> int:
        """How many items `region` does not hold the winner of yet."""
        return sum(
            1
            for key in self.ledger.winners
            if region in self.tables[key[0]] and not self.ledger.settled(region, key)
        )

    def figures(self) -> dict[str, Any]:
        """Writes per Region (local, replicated in), replication latency per Region pair (ms, as
        CloudWatch's ReplicationLatency), and the versions a newer local write won back."""
        with self._lock:
            latency = {
                f"{source}->{target}": {
                    "p50_ms": round(statistics.median(seconds) * 1000, 1),
                    "max_ms": round(max(seconds) * 1000, 1),
                }
                for (source, target), seconds in self._latency.items()
                if seconds
            }
            return {
                "home": self.home,
                "local_writes": dict(self.ledger.local_writes),
                "replicated": dict(self.ledger.replicated),
                "latency": latency,
                "overwritten": self.ledger.overwritten,
                "cut_off": [name for name, region in self.regions.items() if region.cut_off],
                "down": [name for name, region in self.regions.items() if region.stopped],
                "faults": dict(self.faults),
                "behind": {name: self._behind(name) for name in self.regions},  # not at the winner yet
                "read_at": dict(self._reading),
            }

    def close(self) -> None:
        """Stop replicating, and stop the Regions it started (the first home's DynamoDB is the app's)."""
        self.stopping.set()
        for sweeping in self._sweeping.values():
            sweeping.set()
        with self._lock:
            self._lock.notify_all()
        for thread in self.threads:
            thread.join(timeout=10)
        for region in self.regions.values():
            region.stop()

    def environment(self) -> dict[str, str]:
        """Each Region's DynamoDB endpoint, as `.local/env` names it: `DYNAMODB_ENDPOINT_US_WEST_2`."""
        return {
            f"DYNAMODB_ENDPOINT_{name.upper().replace('-', '_')}": r.endpoint
            for name, r in self.regions.items()
        }


def replica_folder(state_dir: Path, region: str) -> Path:
    """Where a replica Region's DynamoDB Local keeps its tables, emptied first: each `up` fills its
    replicas anew from home, as AWS fills a replica it adds."""
    folder = state_dir.resolve() / "regions" / region
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def replicated_tables(account: Account, names: list[str],
                      faults: Sequence[RegionFault] = ()) -> dict[str, tuple[str, ...]]:  # fmt: skip
    """Each table the twin of `names` (home first: the app's own Region) replicates, with its
    Regions, home first. ValueError, in one sentence, for Regions the app cannot have, or faults
    of a Region it has not."""
    home, others = names[0], names[1:]
    for fault in faults:  # home may be cut off (then failed over from); its DynamoDB is the app's
        if fault.region not in others and (fault.region, fault.kind) != (home, "partition"):
            raise ValueError(f"a Region fault names {fault.region}, not one of the replica Regions "
                             f"({', '.join(others) or 'none'}): home's DynamoDB is the app's; "
                             f"cut it off instead: partition={home}@START+SECONDS")  # fmt: skip
    if home != account.region:
        raise ValueError(f"the first Region is home, and this app's stacks are pinned to {account.region}: "
                         f"give {','.join([account.region, *others])}")  # fmt: skip
    if not others or len(set(names)) != len(names):
        raise ValueError(f"name home and one replica Region at least, each once (got {','.join(names)})")
    tables: dict[str, tuple[str, ...]] = {}
    for resource in account.table_resources():
        if replicas := [r for r in replica_regions(resource.properties) if r in others]:
            view = (resource.properties.get("StreamSpecification") or {}).get("StreamViewType")
            if view != BOTH_IMAGES:  # the deploy rule replica-stream: CloudFormation refuses it too
                raise ValueError(f"{resource.construct} has replicas but its stream is {view or 'off'}: a "
                                 f"global table of more than one replica streams {BOTH_IMAGES}")  # fmt: skip
            tables[account.tables[resource.construct]] = (home, *replicas)
    declared = sorted({r for t in account.table_resources() for r in replica_regions(t.properties)})
    if missing := [r for r in others if not any(r in t for t in tables.values())]:
        raise ValueError(f"no table of this app has a replica in {', '.join(missing)} (its replicas: "
                         f"{', '.join(declared) or 'none'}; declare them: docs/many-regions.md)")  # fmt: skip
    return tables


def twin(account: Account, names: list[str], *, lag_s: float = LAG_S,
         faults: Sequence[RegionFault] = ()) -> Replicator:  # fmt: skip
    """The app's global tables across `names` (home first), started: a DynamoDB Local for each
    other Region, each table created there as its template's replica, filled from home, replicated.
    `faults` are checked here; `Replicator.inject` runs them once the app runs."""
    tables = replicated_tables(account, names, faults)
    home, others = names[0], names[1:]
    port = int(account.dynamodb_endpoint.rsplit(":", 1)[1])
    regions = {home: Region(home, account.state_dir.resolve() / "dynamodb", port)}
    regions |= {name: Region(name, replica_folder(account.state_dir, name)) for name in others}
    replicator = Replicator(regions, tables, lag_s=lag_s)
    try:
        for name in others:
            regions[name].start()
        for resource in account.table_resources():
            name = account.tables[resource.construct]
            for region_name in tables.get(name, ())[1:]:
                request = create_request(name, resource.properties)
                request["StreamSpecification"] = {
                    "StreamEnabled": True,
                    "StreamViewType": BOTH_IMAGES,
                }
                ttl = resource.properties.get("TimeToLiveSpecification") or {}
                expiring = ttl.get("AttributeName") if ttl.get("Enabled") else None
                create_table(regions[region_name].client(), request, expiring)
                if expiring:  # TTL deletes in any Region: its deletion replicates to the others
                    replicator.expiring[name] = (expiring, [k["AttributeName"] for k in request["KeySchema"]])
        replicator.start()
    except BaseException:
        replicator.close()
        raise
    return replicator
