"""`hybridsync doctor` on a global table's replicas (issue 53): each one ACTIVE in every Region its
template names, and home's writes reaching each within a minute.

Deployed, DescribeTable's `Replicas` gives each replica's `ReplicaStatus` (ACTIVE when it serves;
CREATING, UPDATING, DELETING, INACCESSIBLE_ENCRYPTION_CREDENTIALS, ...: API_ReplicaDescription), and
CloudWatch's `ReplicationLatency` (AWS/DynamoDB, per `TableName` and `ReceivingRegion`, from the
Region the writes are made in) its average over the last 15 minutes, the same threshold as the
`<Table>ReplicationLatency<Region>` alarm. Locally, the twin's own figures (`up --regions`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hybridsync.truth.doctor.inventory import Check

LATENCY_LIMIT_MS = 60_000  # the alarm's threshold (hybridsync/cdk/monitoring.py `_replication`)
WINDOW = timedelta(minutes=15)


def deployed(dynamodb: Any, cloudwatch: Any, table: str, regions: list[str]) -> list[Check]:
    """Each replica Region's check: its status, then its replication latency."""
    try:
        found = dynamodb.describe_table(TableName=table)["Table"].get("Replicas", [])
    except Exception as error:
        fix = "is the data stack deployed, and may you call dynamodb:DescribeTable?"
        return [Check("replica", table, False, f"cannot describe it: {error}", fix)]
    status = {r.get("RegionName"): r for r in found}
    checks = []
    for region in regions:
        subject = f"{table} in {region}"
        replica = status.get(region)
        if replica is None:
            fix = "CloudFormation adds one replica per stack update: deploy again (docs/many-regions.md)"
            checks.append(Check("replica", subject, False, "no replica there", fix))
        elif replica.get("ReplicaStatus") != "ACTIVE":
            said = " ".join(
                x for x in (replica.get("ReplicaStatus"), replica.get("ReplicaStatusDescription")) if x
            )
            fix = "wait for ACTIVE; INACCESSIBLE_ENCRYPTION_CREDENTIALS: the replica's KMS key"
            checks.append(Check("replica", subject, False, said or "no status", fix))
        else:
            checks.append(_latency(cloudwatch, table, region, subject))
    return checks


def _latency(cloudwatch: Any, table: str, region: str, subject: str) -> Check:
    now = datetime.now(UTC)
    try:
        points = cloudwatch.get_metric_statistics(
            Namespace="AWS/DynamoDB", MetricName="ReplicationLatency",
            Dimensions=[{"Name": "TableName", "Value": table}, {"Name": "ReceivingRegion", "Value": region}],
            StartTime=now - WINDOW, EndTime=now, Period=int(WINDOW.total_seconds()), Statistics=["Average"],
        )["Datapoints"]  # fmt: skip
    except Exception as error:
        return Check("replica", subject, False, f"ACTIVE; its latency unread: {error}",
                     "may you call cloudwatch:GetMetricStatistics?")  # fmt: skip
    if not points:
        return Check("replica", subject, True, "ACTIVE; no replication in 15 minutes (no writes at home)")
    average = max(p["Average"] for p in points)
    if average > LATENCY_LIMIT_MS:
        fix = "home's writes are not reaching it: AWS Health; evacuating a Region: docs/operating.md"
        return Check(
            "replica", subject, False, f"ACTIVE; replication {average / 1000:,.0f} s on average", fix
        )
    return Check("replica", subject, True, f"ACTIVE; replication {average:,.0f} ms on average (15 min)")


def local(replication: dict[str, Any] | None, table: str, regions: list[str]) -> list[Check]:
    """The twin's figures (`hybridsync status`'s `replication`), or one line saying none runs."""
    if replication is None:
        said = "not run locally: `hybridsync up --regions HOME,REGION` runs them"
        return [Check("replica", f"{table} in {', '.join(regions)}", True, said)]
    checks = []
    for region in regions:
        subject = f"{table} in {region}"
        latency = replication.get("latency", {}).get(f"{replication.get('home')}->{region}") or {}
        if region in replication.get("down", []):
            checks.append(
                Check("replica", subject, False, "its DynamoDB is stopped", "a Region fault: it comes back")
            )
        elif region in replication.get("cut_off", []):
            checks.append(
                Check("replica", subject, False, "cut off from the others", "a Region fault: it heals")
            )
        elif region not in replication.get("behind", {}):
            checks.append(Check("replica", subject, False, "not in the twin", "`up --regions` with it"))
        else:
            shown = f", replication p50 {latency['p50_ms']:g} ms" if latency else ""
            behind = replication["behind"][region]
            checks.append(Check("replica", subject, True, f"running, {behind} item(s) behind{shown}"))
    return checks
