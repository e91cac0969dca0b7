"""DynamoDB Streams as production shapes them, over DynamoDB Local (dynamodb/models.py): each
sharded stream's topology, the mappings' pollers started shard by shard, and the app's Streams
API (`StreamsServer`) over them."""

from __future__ import annotations

import logging
import threading
from typing import Any

from hybridsync.local.account import Account
from hybridsync.local.awslambda.functions import LocalFunction
from hybridsync.local.awslambda.mappings import POLL_INTERVAL_S, ShardPoller
from hybridsync.local.dynamodb.models import READERS_PER_SHARD, ShardView, Topology
from hybridsync.local.dynamodb.responses import StreamsServer
from hybridsync.local.dynamodb.tables import Tables
from hybridsync.local.template import TemplateError

log = logging.getLogger(__name__)


class ShardedStreams:
    """N shards, rollover, trimming (the app's `shards`, `shard_lifetime_s`, `shard_records`,
    `retention_s`); else DynamoDB Local's own single shard per table, read directly."""

    def __init__(self, account: Account, tables: Tables, shards: int, lifetime_s: float | None,
                 records: int | None, pollers: list[ShardPoller]) -> None:  # fmt: skip
        self.account, self.shard_count, self.shard_lifetime_s, self.shard_records = (
            account,
            shards,
            lifetime_s,
            records,
        )
        knobs = (lifetime_s, records, account.retention_s)
        self.sharded = shards > 1 or any(knob is not None for knob in knobs)
        self.topologies: dict[str, Topology] = {}  # stream ARN -> its shards, when sharded
        self.plans: dict[str, list[dict[str, Any]]] = {}  # stream ARN -> its mappings, when sharded
        self.partition_keys = tables.partition_keys  # stream ARN -> its table's partition key
        self.pollers = pollers  # the app's, shared with the event source mappings
        self.streams_server: StreamsServer | None = None

    def serve(self) -> None:
        """The app's Streams API (its shards, or DynamoDB Local's with the platform's marks), for
        redrives and any other reader."""
        account = self.account
        self.streams_server = StreamsServer(self.topologies, account.dynamodb_endpoint, account.expiries)

    def start(self) -> None:
        for stream_arn, topology in self.topologies.items():
            self.account.spawn(self.supervise, stream_arn, topology, name=f"shards-{stream_arn[-12:]}")

    def close(self) -> None:
        if self.streams_server is not None:
            self.streams_server.close()

    def read_through(self, name: str) -> list[float]:
        return [t.read_through for arn, t in self.topologies.items()
                if any(p["settings"].name == name for p in self.plans.get(arn, []))]  # fmt: skip

    def plan(self, path: str, plan: dict[str, Any], streams: Any, function: LocalFunction) -> None:
        """A mapping on a sharded stream: its pollers start shard by shard (`supervise`). Each
        function gets a container per shard and lane, as Lambda runs one invocation per shard x
        parallelization factor at once."""
        stream_arn = plan["stream_arn"]
        if stream_arn not in self.topologies:
            table = stream_arn.split(":table/")[1].split("/")[0]
            self.topologies[stream_arn] = Topology(
                streams, stream_arn, self.partition_keys[stream_arn], shards=self.shard_count,
                lifetime_s=self.shard_lifetime_s, records_per_shard=self.shard_records,
                retention_s=self.account.retention_s or 24 * 3600, mark=self.account.expiries.mark,
                state=self.account.state_dir / "shards" / f"{table}.json",
            )  # fmt: skip
        plans = self.plans.setdefault(stream_arn, [])
        if len(plans) >= READERS_PER_SHARD:
            raise TemplateError(
                f"{path}: LimitExceededException: {stream_arn} already has {len(plans)} mappings "
                f"({', '.join(p['settings'].name for p in plans)}); DynamoDB Streams throttles a shard "
                "read by more than two (Lambda's DynamoDB Streams guide): a third consumer must read "
                "another stream or the others' output"
            )
        plans.append(plan)
        function.max_containers = max(function.max_containers,
                                      2 * self.shard_count * plan["settings"].parallelization)  # fmt: skip

    def supervise(self, stream_arn: str, topology: Topology) -> None:
        """Start each mapping's poller on each shard once the shard's parent is done for that
        mapping (Lambda finishes a parent before its children); forget positions of shards the
        stream deleted."""
        started: dict[tuple[str, str], ShardPoller] = {}
        done: set[tuple[str, str]] = set()
        lock = threading.Lock()

        def run(poller: ShardPoller, key: tuple[str, str]) -> None:
            poller.run(self.account.stopping)
            if getattr(poller, "done", False):
                with lock:
                    done.add(key)

        while not self.account.stopping.is_set():
            try:
                topology.pump()
                for shard in list(topology.shards.values()):
                    for plan in self.plans[stream_arn]:
                        name = plan["settings"].name
                        parent = shard.parent
                        with lock:
                            ready = parent is None or parent not in topology.shards or (name, parent) in done
                        if (name, shard.id) in started or not ready:
                            continue
                        poller = ShardPoller(streams=ShardView(topology, shard), shard=shard.id,
                                             retention_s=topology.retention_s, **plan)  # fmt: skip
                        started[(name, shard.id)] = poller
                        self.pollers.append(poller)
                        self.account.spawn(
                            run, poller, (name, shard.id), name=f"poller-{name}-{shard.id[-8:]}"
                        )
                for key in [k for k in started if k[1] in topology.dropped]:
                    plan_of = next(p for p in self.plans[stream_arn] if p["settings"].name == key[0])
                    plan_of["checkpoints"].forget(key[0], stream_arn, key[1])
                    self.pollers.remove(started.pop(key))
                    done.discard(key)
            except Exception:
                log.exception("shards of %s", stream_arn)
            self.account.stopping.wait(POLL_INTERVAL_S)

    def split(self, table: str | None = None, shard: str | None = None) -> tuple[str, str]:
        """Split a shard of a table's stream (the model's name or the physical one; default the
        only sharded stream) into two children, as a partition split does; the children's ids."""
        if not self.topologies:
            raise ValueError("no sharded stream: start the app with shards > 1 or a shard lifetime")
        physical = self.account.table_names.get(table or "", table)
        found = [t for arn, t in self.topologies.items() if physical is None or f":table/{physical}/" in arn]
        if len(found) != 1:
            raise ValueError(f"name one of the sharded tables: {sorted(self.topologies)}")
        return found[0].split(shard)

    def backlog(self, name: str) -> int:
        """Records of a mapping not delivered yet on a sharded stream: in its pollers' buffers and
        in every shard it has not read to the end (children not started included)."""
        waiting = 0
        for stream_arn, topology in self.topologies.items():
            if not any(p["settings"].name == name for p in self.plans.get(stream_arn, [])):
                continue
            pollers = {p.shard: p for p in self.pollers if p.settings.name == name}
            for shard_id in list(topology.shards):
                poller = pollers.get(shard_id)
                if poller is not None and poller.done:
                    continue
                waiting += topology.backlog(shard_id, id(poller) if poller else None)
                waiting += len(poller.buffer) if poller else 0
        return waiting
