"""A Region evacuated, locally (`hybridsync failover --to REGION`): the app's consumers move from
home's replica of its global tables to another Region's, with nothing lost and nothing counted
twice, while writes go on in every Region.

AWS's evacuation is data-plane only: the replicas stay, the writers and consumers move
(prescriptive guidance for global tables, "Evacuation processes"). Here, in order:

1. **Fence the old home.** Its pipeline stops: live, each mapping first delivers what it read;
   offline (the Region cut off or down), it is fenced where it stands. Deployed, its mappings are
   disabled, as soon as the Region answers.
2. **Live: let replication settle.** The new home holds every write the old one took before
   anything reads it, so no change is left behind. Offline, what the old home had not replicated
   arrives when it rejoins (RPO: the replication delay, V2globaltables_HowItWorks.html), and flows
   on from the new home's stream then.
3. **Run the pipeline on the new home's replica.** The same functions and mappings, reading its
   streams from their trim horizon: each replica has its own stream (GlobalTables.html), numbered on
   its own, so the write-back never compares its positions with the old stream's (one slot per
   stream, streams/changes.py SLOT_WIDTH): each row is settled from the new home's item on its first
   record there.
4. **Aggregates: a bounded rebuild.** The aggregation's mappings start disabled, and the rebuild
   (sync/rebuild.py) computes each aggregate as of the start of the new home's stream, from its
   items, then enables them: every change is counted once, by the rebuild or by the stream. Change
   identities cannot do it: the new stream carries each change under identities of its own, and
   replication may merge quick changes of an item into one (global tables FAQ), so a record of one
   stream has no counterpart in the other.

The app that runs afterwards runs in the new home, the replicator's Regions unchanged (replication
goes every way). What the local form cannot show: deployed, the new home's pipeline is a stack of
its own in that Region, with its own roles; locally the same functions run against its replica.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from hybridsync.local.app import LocalApp
from hybridsync.model.declare import Model
from hybridsync.runtime import aws

AGGREGATION = "Aggregate"  # the aggregation function's construct id
SETTLE_TIMEOUT_S = 120.0


@dataclass
class Failover:
    """What a failover did, and how long each step took (seconds)."""

    source: str
    target: str
    live: bool
    fenced_s: float = 0.0
    settled_s: float = 0.0
    started_s: float = 0.0
    rebuilt_s: float = 0.0
    rebuild: dict[str, Any] = field(default_factory=dict)  # the rebuild job's counts
    rebuild_error: str | None = None  # then the aggregates are wrong until a rebuild is run again

    @property
    def total_s(self) -> float:
        return self.fenced_s + self.settled_s + self.started_s + self.rebuilt_s

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"total_s": round(self.total_s, 2)}


def failover(app: LocalApp, to: str, model: Model, *, live: bool = True, http_port: int | None = None,
             say: Callable[[str], None] = lambda _: None) -> tuple[LocalApp, Failover]:  # fmt: skip
    """Move the running `app` to Region `to`: the old app stopped, the new one running (returned,
    with what it took). ValueError, before anything stops, for a Region the app cannot move to."""
    replicator = app.replicator
    if replicator is None:
        raise ValueError("a failover needs the Regions: hybridsync up --regions HOME,REGION")
    source = replicator.home
    if to == source or to not in replicator.regions:
        others = ", ".join(list(replicator.regions)[1:])
        raise ValueError(f"fail over to one of the replica Regions ({others}), "
                         f"not {to}: {source} is home")  # fmt: skip
    if missing := [t for t, names in replicator.tables.items() if to not in names]:
        raise ValueError(f"{', '.join(missing)} has no replica in {to}: it would be left behind")
    if not live and not (replicator.regions[source].cut_off or replicator.regions[source].stopped):
        raise ValueError(f"--offline: {source} still replicates; fail over live (it loses nothing), or "
                         f"cut it off first")  # fmt: skip
    done = Failover(source, to, live)
    began = time.monotonic()
    say(f"fencing {source}: its mappings " + ("deliver what they read, then stop" if live else "stop"))
    app.owns_replicator, owned = False, app.owns_replicator  # the twin outlives the old app
    lambda_port = int(app.lambda_api.endpoint.rsplit(":", 1)[1])  # the operators' commands keep it
    app.stop()
    done.fenced_s, began = time.monotonic() - began, time.monotonic()
    if live:
        say(f"waiting for {to} to hold every write {source} took")
        if not replicator.delivered(source, to, SETTLE_TIMEOUT_S):
            say(f"not settled in {SETTLE_TIMEOUT_S:.0f} s: going on (late writes flow from {to})")
    done.settled_s, began = time.monotonic() - began, time.monotonic()
    replicator.rehome(to)
    account = app._account
    moved = LocalApp(
        account.assembly,
        dynamodb_endpoint=replicator.regions[to].endpoint,
        services_endpoint=account.services_endpoint,
        database_url=account.database_url,
        state_dir=account.state_dir,
        prefix=account.prefix,
        region=account.region,
        faults=account.faults.plan if account.faults else None,  # the delivery faults go on
        iam=account.iam,
        shards=app.shard_count,
        shard_lifetime_s=app.shard_lifetime_s,
        shard_records=app.shard_records,
        retention_s=account.retention_s,
        alarm_period_s=app.alarm_period_s,
        replicator=replicator,
    )
    moved.owns_replicator = owned
    say(f"starting the pipeline on {to}'s replica, its aggregation paused")
    moved.start(http_port=http_port, paused={AGGREGATION}, lambda_port=lambda_port)
    done.started_s, began = time.monotonic() - began, time.monotonic()
    say(f"rebuilding the aggregates from {to}'s items (exactly once: sync/rebuild.py)")
    try:
        done.rebuild = rebuild(moved, model)
    except RuntimeError as failed:  # the pipeline runs; a rebuild run again counts from where it stands
        done.rebuild_error = str(failed)
        say(f"the rebuild failed ({failed}): run `hybridsync aggregates rebuild --deployed` again")
    done.rebuilt_s = time.monotonic() - began
    say(f"{to} is home: {done.total_s:.1f} s")
    return moved, done


def rebuild(app: LocalApp, model: Model) -> dict[str, Any]:
    """The app's aggregates rebuilt in its operations function, as `aggregates rebuild --deployed`
    runs it; the job's counts. The rebuild pauses the aggregation (already paused) and enables it."""
    from hybridsync.sync import jobs, operations, rebuild  # noqa: F401 - rebuild: its kind of job

    lam = aws.client("lambda", app.lambda_api.endpoint, app.region)
    call = operations.deployed("Operations", lam)
    job = call({"operation": "plan", "kind": "rebuild", "spec": {}})["job"]
    store = jobs.JobStore(app.client, model, app.table_names)
    outcome = jobs.run(store, job, operations.remote_invoke(call, None), concurrency=2)
    if outcome.undone:
        raise RuntimeError(f"the rebuild left {outcome.undone} unit(s) undone: {'; '.join(outcome.errors)} "
                           f"(resume: hybridsync aggregates rebuild --resume {job} --deployed)")  # fmt: skip
    return asdict(outcome.counts)
