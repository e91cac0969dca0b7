"""What an operator runs, as one function of events, so it runs where the data is: in the command's
own process, or inside the stack as invocations of its operations function (in the VPC, next to the
database: `--deployed`). The loads and the rebuild are jobs (`hybridsync.sync.jobs`): planned once, then
each unit invoked until done; reconcile, redrives and migrations are one invocation each.

Events: `{"operation": "plan", "kind", "spec"}` -> `{"job"}`; `{"operation": "unit", "job", "unit",
"rate"}` -> the unit as left (done, or its checkpoint at the deadline); `{"operation": "reconcile",
"repair"}`, `{"operation": "redrive", "what": "dead-letters" | "failed-batches", "source"}`,
`{"operation": "migrations", "action": "upgrade" | "current"}`, `{"operation": "trace", "table",
"key", "image"}` -> `{"events"}` (an item's dead letters and row, hybridsync.sync.trace);
`{"operation": "trace", "entity", "key"}` -> `{"table", "key"}` (an entity's item, by its sql_key).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from hybridsync.dynamodb.scans import Pacer
from hybridsync.sync import jobs
from hybridsync.sync.jobs import Counts, JobStore, Services, Unit

DEADLINE_MARGIN_S = 30.0  # an invocation stops starting chunks this long before its deadline


def perform(services: Services, event: dict[str, Any], remaining_s: Callable[[], float]) -> dict[str, Any]:
    from hybridsync.sync import (
        loads,  # noqa: F401 - registers the kinds of job
        rebuild,  # noqa: F401
    )

    operation = event.get("operation")
    if operation == "plan":
        return {"job": jobs.start(services, event["kind"], event.get("spec") or {})}
    if operation == "unit":
        services.pacer = Pacer(event.get("rate") or None)
        store = JobStore(services.client, services.model, services.tables)
        unit = jobs.run_unit(
            services, store, event["job"], int(event["unit"]), until=lambda: remaining_s() < DEADLINE_MARGIN_S
        )
        return dataclasses.asdict(unit)
    if operation == "reconcile":
        from hybridsync.sync.reconcile import reconcile

        report = reconcile(
            services.client,
            services.tables,
            services.engine,
            services.model,
            repair=bool(event.get("repair")),
        )
        return {
            name: {
                "checked": d.checked,
                "missing": [list(map(str, k)) for k in d.missing],
                "stale": [list(map(str, k)) for k in d.stale],
                "extra": [list(map(str, k)) for k in d.extra],
                "unmappable": d.unmappable,
                "unrepaired": d.unrepaired,
            }
            for name, d in report.items()
        }
    if operation == "redrive":
        return _redrive(services, event)
    if operation == "trace":
        from hybridsync.sync import trace

        if "entity" in event:  # an entity and its sql_key: where its item is
            table, key = trace.located(services.engine, services.model, event["entity"], event["key"])
            return {"table": table, "key": key}
        found = trace.in_postgres(services.engine, services.model)(
            event["table"], event["key"], event.get("image")
        )
        return {"events": [e.as_json() for e in found]}
    if operation == "migrations":
        from hybridsync.runtime import settings
        from hybridsync.sql import migrations

        if event.get("action") == "upgrade":
            return _migrate(services)
        return {"revision": migrations.current_revision(settings.database_url())}
    raise ValueError(f"unknown operation {operation!r}")


def _migrate(services: Services) -> dict[str, Any]:
    """An upgrade runs where the schema's owner logs in: this function is the writer, which may not
    change the schema, so it asks the stack's migration function (`MIGRATE_FUNCTION`), as a deploy
    does."""
    function = os.environ.get("MIGRATE_FUNCTION")
    if not function:
        raise ValueError("no MIGRATE_FUNCTION: the stack's migration function runs upgrades")
    answer = deployed(function, services.aws("lambda"))({"RequestType": "Update"})
    return {
        "revision": answer["Data"]["Revision"],
        **({"ahead": a} if (a := answer["Data"].get("AheadOfCode")) else {}),
    }


def _redrive(services: Services, event: dict[str, Any]) -> dict[str, Any]:
    if event.get("what") == "failed-batches":
        from hybridsync.sync import failed

        bucket = os.environ["FAILED_BATCHES_BUCKET"]
        done = failed.redrive(
            [failed.BucketStore(services.aws("s3"), bucket)],
            services.aws("dynamodbstreams"),
            client=services.client,
            tables=services.tables,
            engine=services.engine,
            model=services.model,
        )
        return {
            "batches": done.batches,
            "records": done.records,
            "applied": done.applied,
            "left": [f"{b.consumer or '?'} {b.shard} {b.first}..{b.last}: {why}" for b, why in done.left],
        }
    from hybridsync.sync import outbox, writeback

    source = event.get("source")
    landed, still = 0, []
    if source in (None, writeback.SOURCE):
        truth = writeback.Truth(services.client, services.tables)
        landed, still = writeback.redrive(services.engine, services.model, event.get("ids"), truth=truth)
    if source in (None, outbox.SOURCE):
        views = outbox.redrive(
            services.engine, services.client, services.model, services.tables, event.get("ids")
        )
        landed, still = landed + views[0], still + views[1]
    return {
        "landed": landed,
        "still": [
            {"id": str(s.record.get("eventID") or s.record.get("outbox_id", "?")), "reason": s.reason}
            for s in still
        ],
    }


# --- the runner's side: where a unit is invoked -------------------------------------------------


def deployed(function: str, lambda_client: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Invokes the stack's operations function with an event; its answer, or RuntimeError with
    the function's error."""

    def call(event: dict[str, Any]) -> dict[str, Any]:
        answer = lambda_client.invoke(FunctionName=function, Payload=json.dumps(event).encode())
        payload = json.loads(answer["Payload"].read() or b"null")
        if answer.get("FunctionError"):
            frames = [f for f in payload.get("stackTrace") or [] if f.lstrip().startswith("File")]
            where = frames[-1].strip().replace("\n", ": ") if frames else ""
            raise RuntimeError(f"{function}: {payload.get('errorType')}: {payload.get('errorMessage')}"
                               + (f" (at {where})" if where else ""))  # fmt: skip
        return payload

    return call


def remote_invoke(call: Callable[[dict[str, Any]], dict[str, Any]], rate: float | None) -> jobs.Invoke:
    """A job unit invoked in the operations function (each invocation until its deadline is near)."""

    def invoke(job_id: str, number: int) -> Unit:
        unit = call({"operation": "unit", "job": job_id, "unit": number, "rate": rate})
        return Unit(unit["number"], unit["checkpoint"], unit["done"], Counts(**unit["counts"]), unit["error"])

    return invoke
