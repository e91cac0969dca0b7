"""A Region evacuated in AWS (`hybridsync failover --to REGION --deployed`): the consumers move from
home's pipeline stack to the standby stack waiting in REGION (cdk/standby.py), with nothing lost and
nothing counted twice, while writes go on. The same hand-over as the local one (local/failover.py):

1. **Fence home.** Each mapping of home's pipeline stack is disabled and its drain schedule too, and
   the command waits until Lambda says `Disabled` (UpdateEventSourceMapping; a disabled mapping
   keeps its position and reads nothing more), then its functions' timeout: nothing promises the
   invocation under way ends sooner. Offline (home does not answer), nothing can be fenced: the
   command goes on, and run again once home answers it fences it then.
2. **Live: let replication settle.** No metric proves a replica holds every write (the evacuation
   guide, bp-global-table-design.prescriptive-guidance.evacuation.html); the command waits ten
   times the largest `ReplicationLatency` home's CloudWatch recorded towards REGION in the last 15
   minutes (the metric's dimensions: TableName, ReceivingRegion; CloudWatch metrics for DynamoDB).
   **The database's writer moves** with the app's Aurora cluster (an Aurora Global Database, its
   secondary in REGION's standby database stack): `SwitchoverGlobalCluster` when home is live (no
   data lost: Aurora waits for the secondary to catch up), `FailoverGlobalCluster` with
   `AllowDataLoss` when it is not (what Aurora had not replicated is lost; the write-back replays
   the replica's stream, so rows of DynamoDB's changes come back). The standby's proxy sends its
   writes to the new writer once it is up (Aurora guide, "Using RDS Proxy with Aurora global
   databases"). Your own database's failover is yours, before this command.
3. **REGION is marked active** in cdk.json: a later `cdk deploy` keeps home's pipeline disabled and
   the standby's enabled (the deploy truth lets one side consume at a time), and each side's
   operations function says so now (`PIPELINE_ENABLED`: what a rebuild leaves the aggregation as).
4. **The standby's write-back and drain start**, on its replica's streams from their trim horizon:
   rows settle against its items (one slot per stream, streams/changes.py).
5. **Aggregates: a bounded rebuild** in the standby's operations function (sync/rebuild.py): it
   counts as of the last record it read in each shard of the new stream and starts each shard's
   cursor there; then the aggregation's mappings are enabled and skip what it counted.

Every step is idempotent, so an interrupted failover is finished by running the command again (a
rebuild is skipped once the aggregation runs). Moving back to home is not built yet."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

AGGREGATION = "Aggregate"  # the aggregation function's construct id: its mappings' logical ids start so
DRAIN = "SqlSyncSchedule"  # the outbox drain's schedule (cdk/schedules.py)
LATENCY_WINDOW = timedelta(minutes=15)
LATENCY_FACTOR = 10  # "about ten times the recent maximum replication latency" (docs/many-regions.md)

Clients = Callable[[str, str], Any]  # (service, Region) -> a boto3 client


class Refused(ValueError):
    """A failover that cannot run, said before anything changed."""


@dataclass
class Consumers:
    """One Region's consumers: a stack's stream mappings (logical id -> UUID), its outbox drain's
    schedule (the rule's name; the sweep and the time series' rotation stay) and its outputs."""

    region: str
    stack: str
    mappings: dict[str, str]
    rules: list[str]
    outputs: dict[str, str]

    @classmethod
    def of(cls, clients: Clients, region: str, stack: str) -> Consumers:
        cloudformation = clients("cloudformation", region)
        resources = [
            r
            for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
            for r in page["StackResourceSummaries"]
        ]
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
        return cls(
            region,
            stack,
            {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources
             if r["ResourceType"] == "AWS::Lambda::EventSourceMapping"},
            [r["PhysicalResourceId"] for r in resources
             if r["ResourceType"] == "AWS::Events::Rule" and r["LogicalResourceId"].startswith(DRAIN)],
            {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])},
        )  # fmt: skip

    def split(self) -> tuple[list[str], list[str]]:
        """(the aggregation's mappings, every other mapping)."""
        folding = [u for logical, u in self.mappings.items() if logical.startswith(AGGREGATION)]
        return folding, [u for u in self.mappings.values() if u not in folding]


def switch(clients: Clients, consumers: Consumers, mappings: list[str], *, enabled: bool,
           rules: bool = False, timeout_s: float = 300.0) -> None:  # fmt: skip
    """Enable or disable `mappings` of `consumers` (and its schedules with `rules`), then wait until
    Lambda says each is `Enabled` or `Disabled`."""
    lam = clients("lambda", consumers.region)
    for uuid in mappings:
        lam.update_event_source_mapping(UUID=uuid, Enabled=enabled)
    if rules:
        events = clients("events", consumers.region)
        for rule in consumers.rules:
            (events.enable_rule if enabled else events.disable_rule)(Name=rule)
    wanted, deadline = "Enabled" if enabled else "Disabled", time.monotonic() + timeout_s
    for uuid in mappings:
        while (state := lam.get_event_source_mapping(UUID=uuid)["State"]) != wanted:
            if time.monotonic() > deadline:
                raise TimeoutError(f"mapping {uuid} in {consumers.region} is {state}, not {wanted}, "
                                   f"after {timeout_s:.0f} s")  # fmt: skip
            time.sleep(2)


def replication_wait(clients: Clients, home: str, tables: list[str], receiving: str) -> float:
    """Seconds to let home's writes reach `receiving`: ten times the largest ReplicationLatency
    (milliseconds) home recorded for any of `tables` in the last 15 minutes; 0 without data points
    (nothing written there lately)."""
    cloudwatch, now = clients("cloudwatch", home), datetime.now(UTC)
    largest = 0.0
    for table in tables:
        points = cloudwatch.get_metric_statistics(
            Namespace="AWS/DynamoDB",
            MetricName="ReplicationLatency",
            Dimensions=[
                {"Name": "TableName", "Value": table},
                {"Name": "ReceivingRegion", "Value": receiving},
            ],
            StartTime=now - LATENCY_WINDOW,
            EndTime=now + timedelta(minutes=1),  # the minute under way included
            Period=60,
            Statistics=["Maximum"],
        )["Datapoints"]
        largest = max([largest, *(p["Maximum"] for p in points)])
    return LATENCY_FACTOR * largest / 1000


@dataclass
class Handover:
    """What a deployed failover did, and how long each step took (seconds)."""

    source: str
    target: str
    live: bool
    fenced: bool = False  # home's mappings disabled (offline: not until it answers)
    waited_s: float = 0.0
    rebuilt: bool = False  # False: the aggregation already ran (an earlier run rebuilt)
    writer: str = ""  # with Aurora: the global database's writer endpoint, now in the new home
    steps_s: dict[str, float] = field(default_factory=dict)
    rebuild: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def in_flight_s(clients: Clients, consumers: Consumers) -> int:
    """The longest an invocation of `consumers`' mapped functions or outbox drain can run (their
    Timeout): a disabled mapping or schedule starts nothing more, but the Lambda API promises no end
    to the invocation under way (a late drain at home could put an older version over a newer one
    the new home's drain put: versions guard one Region, the Regions resolve by last writer)."""
    lam = clients("lambda", consumers.region)
    functions = {lam.get_event_source_mapping(UUID=u)["FunctionArn"] for u in consumers.mappings.values()}
    functions |= (
        {consumers.outputs["SqlSyncFunctionName"]} if "SqlSyncFunctionName" in consumers.outputs else set()
    )
    return max((lam.get_function_configuration(FunctionName=f)["Timeout"] for f in functions), default=0)


def declare_running(clients: Clients, consumers: Consumers, running: bool) -> None:
    """The operations function's `PIPELINE_ENABLED`: what a rebuild leaves the aggregation as
    (sync/rebuild.py `paused`), until the next deploy renders the same (cdk.json). The operations
    CLI invokes it unqualified ($LATEST). Never over a deploy's update: it waits for one, and
    writes with the revision it read."""
    from botocore.exceptions import ClientError

    lam, function, said = (
        clients("lambda", consumers.region),
        consumers.outputs["OperationsFunctionName"],
        str(running).lower(),
    )
    for attempt in range(5):
        lam.get_waiter("function_updated_v2").wait(FunctionName=function)
        configuration = lam.get_function_configuration(FunctionName=function)
        variables = configuration.get("Environment", {}).get("Variables", {})
        if variables.get("PIPELINE_ENABLED") == said:
            return
        # the revision read (AWS returns it; moto does not)
        read = {"RevisionId": configuration["RevisionId"]} if "RevisionId" in configuration else {}
        try:
            variables = variables | {"PIPELINE_ENABLED": said}
            lam.update_function_configuration(
                FunctionName=function, Environment={"Variables": variables}, **read
            )
            return
        except ClientError as error:  # an update under way, or one since we read
            if error.response["Error"]["Code"] not in (
                "ResourceConflictException",
                "PreconditionFailedException",
            ):
                raise
            time.sleep(2 * (attempt + 1))
    raise TimeoutError(f"{function} in {consumers.region} kept changing: PIPELINE_ENABLED not set")


WRITER_TIMEOUT_S = 1800.0  # a switchover "typically" takes minutes (Aurora guide); half an hour is none
REISSUE_S = 60.0  # a move that ended (cancelled) with the writer still at home is asked again after it
WRITER_OUTPUTS = ("GlobalClusterId", "ClusterArn")  # the standby database stack's
PROBE_ATTEMPTS = 8  # the standby's proxy reaches the new writer "as soon as it's available": retried


@dataclass
class Writer:
    """The app's Aurora Global Database, as the standby's database stack names it (its outputs
    GlobalClusterId and ClusterArn: the secondary in the standby's Region)."""

    region: str
    global_cluster: str
    cluster_arn: str

    @classmethod
    def of(cls, clients: Clients, region: str, stack: str) -> Writer:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            described = clients("cloudformation", region).describe_stacks(StackName=stack)["Stacks"][0]
            outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
            return cls(region, *(outputs[key] for key in WRITER_OUTPUTS))
        except (BotoCoreError, ClientError, KeyError) as error:
            raise Refused(f"no standby database in {region} ({type(error).__name__}: {error}): "
                          f"npx cdk deploy {stack}") from error  # fmt: skip

    def described(self, clients: Clients) -> dict[str, Any]:
        rds = clients("rds", self.region)  # a member's Region answers for the global database
        (found,) = rds.describe_global_clusters(GlobalClusterIdentifier=self.global_cluster)["GlobalClusters"]
        return found  # type: ignore[no-any-return]

    def holds_writer(self, described: dict[str, Any]) -> bool:
        members = described["GlobalClusterMembers"]
        return any(m["DBClusterArn"] == self.cluster_arn and m["IsWriter"] for m in members)

    def status(self, clients: Clients) -> str:
        rds = clients("rds", self.region)
        (cluster,) = rds.describe_db_clusters(DBClusterIdentifier=self.cluster_arn)["DBClusters"]
        return str(cluster["Status"])

    def ready(self, clients: Clients) -> None:
        """Refused unless the secondary is a member of the global database and available."""
        described = self.described(clients)
        if not any(m["DBClusterArn"] == self.cluster_arn for m in described["GlobalClusterMembers"]):
            raise RuntimeError(f"{self.cluster_arn} is no member of {self.global_cluster}")
        if (status := self.status(clients)) != "available":
            raise RuntimeError(f"its secondary cluster is {status}, not available")

    def move(self, clients: Clients, *, live: bool, say: Callable[[str], None],
             timeout_s: float = WRITER_TIMEOUT_S) -> str:  # fmt: skip
        """The writer in the secondary: a switchover (live: no data lost) or a failover with data loss
        allowed (home down), unless it is there already or one is under way (asked again if one
        ended with the writer still at home: cancelled); then until the global database names the
        secondary its writer, with no move under way, and the secondary is available. The global
        database's writer endpoint, which follows the writer."""
        rds, deadline, asked = clients("rds", self.region), time.monotonic() + timeout_s, -REISSUE_S
        while True:
            described = self.described(clients)
            if self.holds_writer(described) and not _moving(described):
                if self.status(clients) == "available":
                    return str(described.get("Endpoint") or self.cluster_arn)
            elif not _moving(described) and time.monotonic() - asked >= REISSUE_S:
                target = {"GlobalClusterIdentifier": self.global_cluster,
                          "TargetDbClusterIdentifier": self.cluster_arn}  # fmt: skip
                if live:
                    say(f"switching {self.global_cluster}'s writer over to {self.region} (no data lost)")
                    rds.switchover_global_cluster(**target)
                else:
                    say(f"failing {self.global_cluster}'s writer over to {self.region}: what it had not "
                        "replicated is lost")  # fmt: skip
                    rds.failover_global_cluster(**target, AllowDataLoss=True)
                asked = time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.global_cluster}'s writer is not in {self.region} after "
                                   f"{timeout_s:.0f} s: run this again to go on waiting")  # fmt: skip
            time.sleep(10)


def _moving(described: dict[str, Any]) -> bool:
    """A switchover or failover under way (FailoverState: pending, failing-over, switching-over or
    cancelling; "empty unless" one is scheduled or in progress)."""
    return bool((described.get("FailoverState") or {}).get("Status"))


def reached(probe: Callable[[], None], say: Callable[[str], None]) -> None:
    """`probe` until it passes: right after a move the proxy may still be finding its new writer."""
    for attempt in range(PROBE_ATTEMPTS):
        try:
            return probe()
        except Exception as error:
            if attempt == PROBE_ATTEMPTS - 1:
                raise RuntimeError(f"the standby does not reach the new writer: {error}") from error
            say(f"the standby does not reach the new writer yet ({type(error).__name__}): trying again")
            time.sleep(15)


def fence(clients: Clients, home: Consumers, wait: Callable[[float], None], say: Callable[[str], None],
          *, fenced_before: bool = False) -> None:  # fmt: skip
    """Home's consumers stopped: its operations function told first (a rebuild there then leaves its
    aggregation off), its mappings and drain disabled, its invocations under way let end, and the
    mappings disabled once more (what re-enabled one meanwhile is undone). `fenced_before`: an
    earlier run fenced it and waited; with every mapping still disabled, nothing is under way."""
    lam = clients("lambda", home.region)
    function = home.outputs["OperationsFunctionName"]
    declared = (
        lam.get_function_configuration(FunctionName=function).get("Environment", {}).get("Variables", {})
    )
    folding, _ = home.split()
    if declared.get("PIPELINE_ENABLED") == "true" and any(
        lam.get_event_source_mapping(UUID=u)["State"] != "Enabled" for u in folding
    ):  # a rebuild pauses it, and enables it when its unit ends (up to 15 minutes later)
        raise Refused(f"{home.region}'s aggregation is paused: a rebuild runs there (`hybridsync jobs` lists "
                      "it); fail over once it ends")  # fmt: skip
    declare_running(clients, home, False)
    idle = all(lam.get_event_source_mapping(UUID=u)["State"] == "Disabled" for u in home.mappings.values())
    switch(clients, home, list(home.mappings.values()), enabled=False, rules=True)
    if fenced_before and idle:
        return
    longest = in_flight_s(clients, home)
    say(f"waiting {longest} s for {home.region}'s invocations under way to end (its functions' timeout)")
    wait(longest)
    switch(clients, home, list(home.mappings.values()), enabled=False, rules=True)


def failover(
    clients: Clients,
    *,
    home: str,
    prefix: str,
    to: str,
    standbys: dict[str, Any],
    save: Callable[[dict[str, Any]], None],
    probe: Callable[[Consumers], None],
    rebuild: Callable[[Consumers, dict[str, str]], dict[str, Any]],
    live: bool = True,
    writer: Writer | None = None,
    wait: Callable[[float], None] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Handover:
    """Move the consumers from home's pipeline stack to the standby in `to` (above). `standbys`: the
    project's standby entries (cdk.json), `save` writes them back; `probe` proves the standby
    reaches its database before anything stops; `rebuild` runs the aggregates' rebuild in the
    standby (its consumers, the tables' names there); `writer`: the app's Aurora Global Database,
    whose writer moves to `to` before the standby consumes. Refused: nothing changed."""
    from botocore.exceptions import BotoCoreError, ClientError

    wait = wait or time.sleep
    standby = _ready(clients, prefix, to, standbys, probe, say)
    entry = standbys[to]
    tables = {name: table["name"] for name, table in entry["tables"].items()}
    done, began = Handover(home, to, live), time.monotonic()

    def step(name: str) -> None:
        nonlocal began
        done.steps_s[name], began = round(time.monotonic() - began, 2), time.monotonic()

    say(f"fencing {home}: its mappings and its drain schedule disabled")
    try:
        pipeline: Consumers | None = Consumers.of(clients, home, f"{prefix}-pipeline")
    except (BotoCoreError, ClientError) as error:
        if live:
            raise Refused(f"{home} does not answer ({error}): if it is down, fail over --offline") from error
        say(f"{home} does not answer ({type(error).__name__}): not fenced; run this again once it "
            "answers, and it disables home's consumers then")  # fmt: skip
        pipeline = None
    if pipeline is not None:  # from here on a failure is finished by running the command again
        fence(clients, pipeline, wait, say, fenced_before=bool(entry.get("active")))
        done.fenced = True
    step("fence")
    if live:  # what the invocations under way wrote at home, too
        seconds = replication_wait(clients, home, sorted(tables.values()), to)
        say(f"waiting {seconds:.1f} s for {to} to hold every write {home} took (10 x replication latency)")
        wait(seconds)
        done.waited_s = seconds
    step("settle")
    if writer is not None:  # home's consumers write no more; the standby's have yet to start
        done.writer = writer.move(clients, live=live, say=say)
        say(f"the database's writer is in {to}: {done.writer} (the global writer endpoint follows it)")
        reached(lambda: probe(standby), say)  # its functions reach the new writer through their proxy
    step("database")
    entry["active"] = True  # deploys keep home off and the standby's write-back and drain on
    save(standbys)
    folding, others = standby.split()
    say(f"{to} is active in cdk.json; starting its write-back and drain on its replica")
    switch(clients, standby, others, enabled=True, rules=True)
    step("start")
    if entry.get("rebuilt"):
        say("an earlier run rebuilt the aggregates")
    elif not folding:  # a model without aggregates: nothing to count
        entry["rebuilt"] = True
        save(standbys)
    else:  # the aggregation stays off until the rebuild succeeded, here and in any deploy meanwhile
        say(f"rebuilding the aggregates from {to}'s items in its operations function, each change once")
        done.rebuild, done.rebuilt = rebuild(standby, tables), True
        entry["rebuilt"] = True
        save(standbys)
    switch(clients, standby, folding, enabled=True)
    declare_running(clients, standby, True)
    step("rebuild")
    say(f"{to} is home: {sum(done.steps_s.values()):.1f} s")
    return done


def _ready(clients: Clients, prefix: str, to: str, standbys: dict[str, Any],
           probe: Callable[[Consumers], None], say: Callable[[str], None]) -> Consumers:  # fmt: skip
    """The standby's consumers, if it can take over; else Refused, nothing changed."""
    from botocore.exceptions import BotoCoreError, ClientError

    if to not in standbys:
        named = ", ".join(sorted(standbys)) or "none"
        raise Refused(f"no standby prepared in {to} (cdk.json names {named}): run `hybridsync standby "
                      f"{to} ...`, then deploy it")  # fmt: skip
    if others := sorted(r for r, e in standbys.items() if e.get("active") and r != to):
        raise Refused(f"{others[0]} consumes since an earlier failover; moving on from a standby is not "
                      "built yet (docs/many-regions.md#not-yet)")  # fmt: skip
    try:
        standby = Consumers.of(clients, to, f"{prefix}-standby-{to}")
    except (BotoCoreError, ClientError) as error:
        raise Refused(f"no standby stack in {to} ({error}): npx cdk deploy {prefix}-standby-{to}") from error
    if not standbys[to].get("active"):  # before anything stops
        say(f"checking that {to}'s standby reaches the database, and that no rebuild runs")
        try:
            probe(standby)
        except Exception as error:
            raise Refused(f"{to}'s standby cannot work: {error}") from error
    return standby


RUNNING_JOB = timedelta(hours=1)  # an unfinished job older than this is taken for abandoned


def rebuild_under_way(dynamodb: Any, model: Any, tables: dict[str, str]) -> str | None:
    """A rebuild job started in the last hour with units neither done nor failed (a job's items are
    in the global tables: any replica lists every Region's), as `job (done/units)`; else None."""
    from hybridsync.sync import jobs

    since = (datetime.now(UTC) - RUNNING_JOB).isoformat(timespec="seconds")
    for job in jobs.JobStore(dynamodb, model, tables).jobs():
        if (
            job["kind"] == "rebuild"
            and job["done"] < job["units"]
            and not job["errors"]
            and job["created"] > since
        ):
            return f"{job['job']} ({job['done']}/{job['units']} units)"
    return None


def probe_in(clients: Clients, model: Any, tables: dict[str, str],
             writer: Writer | None = None) -> Callable[[Consumers], None]:  # fmt: skip
    """Whether the standby can take over now: no rebuild job under way (its units, at home, would
    write home's aggregates over the new home's, and re-enable home's aggregation: the job items
    are in the global tables, so the standby's replica lists them even when home is down), and its
    operations function reads the schema's revision (its network, its replica secret and the
    database answer). With Aurora, before the writer moved (its proxy's read/write endpoint
    refuses every request until then): its secondary is a member of the global database and
    available, and its operations function logs in through the proxy's read-only endpoint (the
    doctor's probe: its network, IAM login and the replica secrets); during a move, nothing more."""

    def probe(standby: Consumers) -> None:
        from hybridsync.sync import operations

        if running := rebuild_under_way(clients("dynamodb", standby.region), model, tables):
            raise RuntimeError(
                f"the rebuild {running} is under way (`hybridsync jobs`): fail over once it ends"
            )
        call = operations.deployed(
            standby.outputs["OperationsFunctionName"], clients("lambda", standby.region)
        )
        if writer is not None and not writer.holds_writer(described := writer.described(clients)):
            if _moving(described):  # a move under way (a run that stopped): the failover waits for it
                return
            writer.ready(clients)
            # its own login, through the proxy's read-only endpoint: the read/write one has no writer yet
            login = call({"hybridsync": "doctor", "database": "reader"})["database"]
            if login["outcome"] != "connected":
                raise RuntimeError(f"its operations function cannot log in: {login['detail']}")
            return
        call({"operation": "migrations", "action": "current"})

    return probe


def rebuild_job(lam: Any, function: str, dynamodb: Any, model: Any, tables: dict[str, str]) -> dict[str, Any]:
    """The aggregates rebuilt as `aggregates rebuild --deployed` runs it, in the operations function
    `function` (the local failover's and the deployed one's): the job planned there, its units
    invoked one at a time (each pauses the aggregation's mappings and leaves them as the function's
    PIPELINE_ENABLED says); the job's counts."""
    from hybridsync.sync import jobs, operations, rebuild  # noqa: F401 - rebuild: its kind of job

    call = operations.deployed(function, lam)
    job = call({"operation": "plan", "kind": "rebuild", "spec": {}})["job"]
    store = jobs.JobStore(dynamodb, model, tables)
    outcome = jobs.run(store, job, operations.remote_invoke(call, None), concurrency=1)
    if outcome.undone:
        raise RuntimeError(f"the rebuild left {outcome.undone} unit(s) undone: {'; '.join(outcome.errors)} "
                           "(run it again: it rebuilds anew)")  # fmt: skip
    return asdict(outcome.counts)


def rebuild_in(clients: Clients, model: Any) -> Callable[[Consumers, dict[str, str]], dict[str, Any]]:
    """The rebuild in the standby's operations function, on its Region's tables."""

    def run(standby: Consumers, tables: dict[str, str]) -> dict[str, Any]:
        lam, dynamodb = clients("lambda", standby.region), clients("dynamodb", standby.region)
        return rebuild_job(lam, standby.outputs["OperationsFunctionName"], dynamodb, model, tables)

    return run
