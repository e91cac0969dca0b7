"""Jobs: the long operations (the loads, the aggregates' rebuild) cut into work units, each unit
checkpointed in DynamoDB after every chunk it commits, so a run that is killed resumes where each
unit stopped (`--resume JOB`), redoing at most the chunk in flight.

A unit runs in the command's own process, or, `--deployed`, as invocations of the stack's
operations function (inside the VPC, next to the database): an invocation works until its deadline
is near, saves, and the runner invokes it again. The same `run_unit` either way."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from hybridsync.dynamodb import store
from hybridsync.dynamodb.scans import Pacer
from hybridsync.model.convert import marshal, unmarshal
from hybridsync.model.declare import Model
from hybridsync.sql import deadletters
from hybridsync.streams.records import DeadLetter

SOURCE = "load"  # the dead letters of a load: rows and items that cannot cross
DONE = "done"  # a unit's last checkpoint


@dataclass
class Counts:
    """What a unit (or a job) did: rows or items read, written, skipped because the other side held
    something as new or newer, left alone (not the load's), dead-lettered."""

    read: int = 0
    written: int = 0
    older: int = 0
    skipped: int = 0
    dead_lettered: int = 0

    def add(self, other: Counts) -> Counts:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)
        return self


@dataclass
class Unit:
    number: int
    checkpoint: Any = None
    done: bool = False
    counts: Counts = field(default_factory=Counts)
    error: str | None = None


@dataclass
class Services:
    """What a unit's work reaches: DynamoDB, PostgreSQL, the model, the tables by logical name,
    and (made on first use) the other AWS clients."""

    client: Any
    engine: sa.Engine
    model: Model
    tables: dict[str, str]
    clients: Callable[[str], Any]  # service name -> boto3 client
    pacer: Pacer = field(default_factory=lambda: Pacer(None))

    def aws(self, service: str) -> Any:
        return self.clients(service)

    def dead_letter(self, letters: list[DeadLetter]) -> None:
        if letters:
            with self.engine.begin() as conn:
                deadletters.store(conn, SOURCE, letters)


# A kind of job: `plan(services, spec) -> (spec, units)` when the job is made, and
# `work(services, spec, unit, checkpoint)` yielding (checkpoint, counts) after each committed chunk
# (the last checkpoint DONE).
Work = Callable[[Services, dict[str, Any], int, Any], Iterator[tuple[Any, Counts]]]
Plan = Callable[[Services, dict[str, Any]], tuple[dict[str, Any], int]]
KINDS: dict[str, tuple[Plan, Work]] = {}


def kind(name: str, plan: Plan) -> Callable[[Work], Work]:
    def register(work: Work) -> Work:
        KINDS[name] = (plan, work)
        return work

    return register


class JobError(RuntimeError):
    pass


class JobStore:
    """Jobs and their units, as items of the model's job entities (`Model.jobs`)."""

    def __init__(self, client: Any, model: Model, tables: dict[str, str]):
        self.client, self.job, self.unit_entity = client, model.jobs["job"], model.jobs["unit"]
        self.table = tables[self.job.table.name]

    def create(self, kind_: str, spec: dict[str, Any], units: int) -> str:
        job_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{kind_}-{secrets.token_hex(2)}"
        header = {
            "JobId": job_id,
            "Kind": kind_,
            "Spec": json.dumps(spec, default=str),
            "Units": units,
            "Created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self.client.put_item(TableName=self.table, Item=marshal(self.job.item(header)))
        for number in range(units):
            self.save(job_id, Unit(number))
        return job_id

    def header(self, job_id: str) -> dict[str, Any]:
        found = store.get(self.client, self.table, self.job.key({"JobId": job_id}))
        if found is None:
            raise JobError(f"no job {job_id!r} (`hybridsync jobs` lists them)")
        return found | {"Spec": json.loads(found["Spec"])}

    def units(self, job_id: str) -> list[Unit]:
        where = {"JobId": job_id}
        out = []
        for page in store.pages(
            self.client,
            "query",
            TableName=self.table,
            ConsistentRead=True,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": self.job.table.partition.name},
            ExpressionAttributeValues=marshal(
                {":pk": self.unit_entity.key_value(self.job.table.partition.name, where)}
            ),
        ):
            out += [_unit(unmarshal(raw)) for raw in page["Items"]]
        return sorted(out, key=lambda u: u.number)

    def unit(self, job_id: str, number: int) -> Unit:
        item = store.get(self.client, self.table, self.unit_entity.key({"JobId": job_id, "Unit": number}))
        if item is None:
            raise JobError(f"job {job_id} has no unit {number}")
        return _unit(item)

    def save(self, job_id: str, unit: Unit) -> None:
        values = {
            "JobId": job_id,
            "Unit": unit.number,
            "Done": unit.done,
            "Counts": json.dumps(asdict(unit.counts)),
            "Checkpoint": None if unit.checkpoint is None else json.dumps(unit.checkpoint, default=str),
            "Error": unit.error,
        }
        self.client.put_item(TableName=self.table, Item=marshal(self.unit_entity.item(values)))

    def jobs(self) -> list[dict[str, Any]]:
        """Every job, newest first, with its units' totals."""
        pk = self.job.table.partition.name
        listed = []
        for page in store.pages(
            self.client,
            "query",
            TableName=self.table,
            ConsistentRead=True,
            ScanIndexForward=False,
            KeyConditionExpression="#pk = :pk",
            ExpressionAttributeNames={"#pk": pk},
            ExpressionAttributeValues=marshal({":pk": self.job.key_value(pk, {})}),
        ):
            for raw in page["Items"]:
                header = unmarshal(raw)
                units = self.units(header["JobId"])
                total = Counts()
                for unit in units:
                    total.add(unit.counts)
                listed.append(
                    {
                        "job": header["JobId"],
                        "kind": header["Kind"],
                        "created": header["Created"],
                        "spec": json.loads(header["Spec"]),
                        "units": len(units),
                        "done": sum(u.done for u in units),
                        "counts": asdict(total),
                        "errors": [u.error for u in units if u.error],
                    }
                )
        return listed


def _unit(item: dict[str, Any]) -> Unit:
    checkpoint = json.loads(item["Checkpoint"]) if item.get("Checkpoint") else None
    return Unit(
        int(item["Unit"]),
        checkpoint,
        bool(item["Done"]),
        Counts(**json.loads(item["Counts"])),
        item.get("Error"),
    )


def plan(services: Services, kind_: str, spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    if kind_ not in KINDS:
        raise JobError(f"no kind of job {kind_!r}: {', '.join(sorted(KINDS))}")
    return KINDS[kind_][0](services, spec)


def run_unit(
    services: Services, jobs: JobStore, job_id: str, number: int, *, until: Callable[[], bool] = lambda: False
) -> Unit:
    """Work on one unit from its checkpoint, saving after each committed chunk, until it is done
    or `until()` says stop (a deadline near, a test's kill)."""
    header, unit = jobs.header(job_id), jobs.unit(job_id, number)
    if unit.done:
        return unit
    unit.error = None  # resumed: an earlier failure is history
    work = KINDS[header["Kind"]][1](services, header["Spec"], unit.number, unit.checkpoint)
    try:
        for checkpoint, counts in work:
            unit.counts.add(counts)
            unit.checkpoint, unit.done = checkpoint, checkpoint == DONE
            jobs.save(job_id, unit)
            if unit.done or until():
                break
    finally:
        work.close()  # type: ignore[attr-defined]
    return unit


@dataclass
class Outcome:
    job: str
    counts: Counts
    units: int
    undone: int
    seconds: float
    errors: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            **asdict(self.counts),
            "units": self.units,
            "undone": self.undone,
            "seconds": round(self.seconds, 3),
            "errors": self.errors,
        }


Invoke = Callable[[str, int], Unit]  # (job, unit) -> the unit as the invocation left it


def start(services: Services, kind_: str, spec: dict[str, Any]) -> str:
    """Plan a job (cut it into units) and record it; its id."""
    planned, units = plan(services, kind_, spec)
    return JobStore(services.client, services.model, services.tables).create(kind_, planned, units)


def in_process(services: Services, slice_s: float = 2.0) -> Invoke:
    """Runs a unit here for up to `slice_s` at a time (then the runner shows progress and goes on),
    as the operations function runs one until its deadline is near."""
    jobs = JobStore(services.client, services.model, services.tables)

    def invoke(job_id: str, number: int) -> Unit:
        deadline = time.monotonic() + slice_s
        return run_unit(services, jobs, job_id, number, until=lambda: time.monotonic() > deadline)

    return invoke


def run(
    jobs: JobStore,
    job_id: str,
    invoke: Invoke,
    *,
    concurrency: int = 4,
    progress: Callable[[Counts], None] = lambda _: None,
) -> Outcome:
    """Every unit of a job to its end, `concurrency` at a time: each invoked again while it is
    neither done nor failed (an invocation stops at its deadline with its checkpoint saved)."""
    started = time.monotonic()
    units = jobs.units(job_id)
    before = Counts()
    for unit in units:
        before.add(unit.counts)
    progress(before)

    def drive(unit: Unit) -> Unit:
        while not unit.done:
            try:
                after = invoke(job_id, unit.number)
            except Exception as error:  # the unit stays resumable from its checkpoint; the job is undone
                unit.error = f"{type(error).__name__}: {error}"
                jobs.save(job_id, unit)
                return unit
            progress(Counts(**{k: v - getattr(unit.counts, k) for k, v in asdict(after.counts).items()}))
            unit = after
        return unit

    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        finished = list(pool.map(drive, [u for u in units if not u.done]))
    final = {u.number: u for u in units} | {u.number: u for u in finished}
    total = Counts()
    for unit in final.values():
        total.add(unit.counts)
    undone = [u for u in final.values() if not u.done]
    return Outcome(
        job_id,
        total,
        len(final),
        len(undone),
        time.monotonic() - started,
        [f"unit {u.number}: {u.error}" for u in undone if u.error],
    )
