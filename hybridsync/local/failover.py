"""A Region evacuated, locally (`hybridsync failover --to REGION`): the app's consumers move from
home's replica of its global tables to another Region's, with nothing lost and nothing counted
twice, while writes go on in every Region.

AWS's guide to evacuating a Region pauses the writes to it, waits for them to replicate, and
resumes them in another (bp-global-table-design.prescriptive-guidance.evacuation.html); the
replicas stay. hybridsync's reading of it: the engine's consumers move with the writers. Here, in
order:

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
   (sync/rebuild.py) computes each aggregate from the new home's items as of the last record it
   read in each shard of the new stream, starts each shard's cursor there, then enables them: every
   change is counted once, by the rebuild or by the stream, however far the trim horizon moves
   meanwhile (in AWS records over 24 h old are trimmed all the time). Change identities cannot do
   it: the new stream carries each change under identities of its own, and replication may merge
   quick changes of an item into one (V2globaltables_HowItWorks.html), so a record of one stream
   has no counterpart in the other.

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
from hybridsync.local.dynamodb.replication import Replicator
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
    delivered: bool = True  # live: every write the old home took reached the new one before it ran
    rebuild: dict[str, Any] = field(default_factory=dict)  # the rebuild job's counts
    rebuild_error: str | None = None  # then the aggregates are wrong until a rebuild is run again

    @property
    def total_s(self) -> float:
        return self.fenced_s + self.settled_s + self.started_s + self.rebuilt_s

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"total_s": round(self.total_s, 2)}


class Refused(ValueError):
    """A failover that cannot run, said before anything stops."""


class Stranded(RuntimeError):
    """A failover that failed after the old home was fenced and before the new one ran: nothing
    runs the pipeline (the data is kept; `up` stops, and starts again at the old home)."""


def failover(app: LocalApp, to: str, model: Model, *, live: bool = True, http_port: int | None = None,
             say: Callable[[str], None] = lambda _: None,
             started: Callable[[LocalApp], None] = lambda _: None) -> tuple[LocalApp, Failover]:  # fmt: skip
    """Move the running `app` to Region `to`: the old app stopped, the new one running (returned,
    with what it took; `started` is told of it as soon as it runs). Refused, before anything stops,
    for a Region the app cannot move to; Stranded if it fails between the two apps."""
    replicator = _check(app, to, live)
    source, done = replicator.home, Failover(replicator.home, to, live)
    began = time.monotonic()
    say(f"fencing {source}: its mappings " + ("deliver what they read, then stop" if live else "stop"))
    app.owns_replicator, owned = False, app.owns_replicator  # the twin outlives the old app
    lambda_port = int(app.lambda_api.endpoint.rsplit(":", 1)[1])  # the operators' commands keep it
    http = app.http.server_address[1] if app.http is not None else http_port  # so does the HTTP API
    try:
        app.stop()
        if alive := [t.name for t in app._account.threads if t.is_alive()]:
            raise Stranded(f"{source}'s pollers did not stop ({', '.join(alive)}): not fenced")
        done.fenced_s, began = time.monotonic() - began, time.monotonic()
        if live:
            say(f"waiting for {to} to hold every write {source} took")
            done.delivered = replicator.delivered(source, to, SETTLE_TIMEOUT_S)
            if not done.delivered:
                say(f"not delivered in {SETTLE_TIMEOUT_S:.0f} s: going on; what {source} took flows on "
                    f"when it arrives, and the aggregates need one more rebuild then")  # fmt: skip
        done.settled_s, began = time.monotonic() - began, time.monotonic()
        replicator.rehome(to)
        moved = _moved(app, replicator)
        say(f"starting the pipeline on {to}'s replica, its aggregation paused")
        moved.start(http_port=http, paused={AGGREGATION}, lambda_port=lambda_port)
    except BaseException as failed:
        replicator.close()  # nothing runs: `up` stops with the twin's Regions
        raise Stranded(f"the failover failed after {source} was fenced: {failed}") from failed
    moved.owns_replicator = owned
    started(moved)
    done.started_s, began = time.monotonic() - began, time.monotonic()
    say(f"rebuilding the aggregates from {to}'s items, counting each change once")
    try:
        done.rebuild = rebuild(moved, model)
    except Exception as failed:  # the pipeline runs; a rebuild run again counts from where it stands
        done.rebuild_error = f"{type(failed).__name__}: {failed}"
        say(f"the rebuild failed ({failed}): the aggregates are not right until it is run again")
    done.rebuilt_s = time.monotonic() - began
    say(f"{to} is home: {done.total_s:.1f} s")
    return moved, done


def _check(app: LocalApp, to: str, live: bool) -> Replicator:
    """The app's twin, if the app can move to `to` now; else Refused, in one sentence."""
    replicator = app.replicator
    if replicator is None:
        raise Refused("a failover needs the Regions: hybridsync up --regions HOME,REGION")
    source = replicator.home
    if to == source or to not in replicator.regions:
        others = ", ".join(list(replicator.regions)[1:])
        raise Refused(f"fail over to one of the replica Regions ({others}), not {to}: {source} is home")
    tables = {app.tables[r.construct] for r in app._account.table_resources()}
    if missing := sorted(t for t in tables if to not in replicator.tables.get(t, ())):
        raise Refused(f"{', '.join(missing)} has no replica in {to}: it would be left behind")
    if app.pumps:  # the new stream's history would reach Kinesis again, under new change identities
        raise Refused("tables feeding the engine through Kinesis cannot fail over yet: their Kinesis "
                      "destination stays in the old home")  # fmt: skip
    away = replicator.regions[source].cut_off or replicator.regions[source].stopped
    if live and away:
        raise Refused(f"{source} is cut off: nothing it took can reach {to} now; fail over --offline")
    if not live and not away:
        raise Refused(f"--offline: {source} still replicates: fail over live (it loses nothing); to "
                      f"practise an offline one, start up with --region-faults "
                      f"partition={source}@START+SECONDS")  # fmt: skip
    return replicator


def _moved(app: LocalApp, replicator: Replicator) -> LocalApp:
    """The app, on the new home's DynamoDB, with the old one's services, database and settings."""
    account = app._account
    return LocalApp(
        account.assembly,
        dynamodb_endpoint=replicator.regions[replicator.home].endpoint,
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


def rebuild(app: LocalApp, model: Model) -> dict[str, Any]:
    """The app's aggregates rebuilt in its operations function, as `aggregates rebuild --deployed`
    runs it; the job's counts. The rebuild pauses the aggregation (already paused) and enables it."""
    from hybridsync.sync.deployed_failover import rebuild_job

    lam = aws.client("lambda", app.lambda_api.endpoint, app.region)
    return rebuild_job(lam, "Operations", app.client, model, app.table_names)
