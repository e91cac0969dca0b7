"""`hybridsync standby REGION`: prepare a replica Region's standby stack (cdk/standby.py). It reads
what crosses Regions from the deployed app, once, and writes it into cdk.json's context (`standby`),
where the CDK app reads it at synth: each table's name (home's data stack) and its replica's stream
ARN in REGION (DescribeTable there), the database roles' secrets (home's database stack; their
replicas in REGION have the same ARN but the Region), the bodies bucket, and, for your own
database, the network in REGION that reaches it (given; with the app's Aurora cluster the standby
makes its own VPC and a secondary cluster of an Aurora Global Database). cdk.json, not
cdk.context.json: it is committed and never cleared (`cdk context --clear`), and after a deployed
failover it says which Region consumes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hybridsync.cli.common import Commands, cdk_context, project_prefix

SETTINGS_FILE = "cdk.json"
FAILOVER_SAYS = ("active", "rebuilt")  # what `hybridsync failover --deployed` writes into an entry


def add_standby(cli: Commands) -> None:
    standby = cli.add(
        "standby",
        "prepare a standby stack in a replica Region: the engine's consumers deployed there idle, so "
        "`hybridsync failover --to REGION --deployed` has a pipeline to move to; reads the deployed "
        "app and writes what the stack needs into cdk.json (then: npx cdk deploy --all)",
        "hybridsync standby us-west-2  (your own database: --vpc vpc-0abc --subnets subnet-0a,subnet-0b)",
        _standby,
    )
    standby.add_argument("region", metavar="REGION", help="a Region the model's tables have replicas in")
    standby.add_argument("--vpc", help="your own database: the VPC in REGION whose routes reach it (the "
                         "app's Aurora cluster: none, the standby makes its own)")  # fmt: skip
    standby.add_argument("--subnets", help="your own database: comma-separated private subnets of that VPC")
    standby.add_argument("--streams-endpoint", help="without a NAT: the URL of your DynamoDB Streams "
                         "interface endpoint in that VPC (it has no private DNS)")  # fmt: skip
    standby.add_argument("--alarm-topic-arn", help="an SNS topic of yours in REGION for the standby's "
                         "alarms (default: one of its own; -c alarm_email subscribes to it)")  # fmt: skip
    standby.add_argument("--home", help="the home Region (default: cdk.json's context `home_region`)")
    standby.add_argument("--prefix", help="the stacks' prefix (default: cdk.json's context `prefix`)")


def _standby(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from hybridsync.model import config
    from hybridsync.model.declare import regions

    root = config.project_root() or Path.cwd()
    settings = cdk_context(root)
    try:
        (region,) = regions((args.region,), "REGION")
    except ValueError as wrong:
        raise SystemExit(f"hybridsync standby: {wrong}") from None
    home = args.home or settings.get("home_region")
    if not home:
        raise SystemExit("hybridsync standby: no home Region: --home us-east-1, or cdk.json's context "
                         "`home_region` (the app with replicas has one)")  # fmt: skip
    if region == home:
        raise SystemExit(f"hybridsync standby: {region} is home; a standby waits in a replica Region")
    own = bool(settings.get("existing_db_secret_arn"))  # else the app's Aurora cluster
    if own and not (args.vpc and args.subnets):
        raise SystemExit("hybridsync standby: your database (existing_db_secret_arn) needs the standby's "
                         f"network in {region}, whose routes reach it: --vpc vpc-... "
                         "--subnets subnet-a,subnet-b")  # fmt: skip
    if not own and (args.vpc or args.subnets or args.streams_endpoint):
        raise SystemExit("hybridsync standby: the app's Aurora cluster stands by in a VPC the standby makes, "
                         "as home's: drop --vpc, --subnets and --streams-endpoint")  # fmt: skip
    prefix = args.prefix or project_prefix()
    try:
        entry = _entry(config.model(), f"{prefix}-data", f"{prefix}-database", home, region)
    except (BotoCoreError, ClientError) as error:
        raise SystemExit(f"hybridsync standby: {error} (deployed in {home}? the right account?)") from None
    if own:
        entry |= {"vpc_id": args.vpc, "subnet_ids": [s for s in args.subnets.split(",") if s]}
    entry |= {"streams_endpoint": args.streams_endpoint} if args.streams_endpoint else {}
    entry |= {"alarm_topic_arn": args.alarm_topic_arn} if args.alarm_topic_arn else {}
    entries = standbys(root)
    # run again (new subnets, a table's replica added), a standby keeps what a failover said of it
    said = {k: v for k, v in entries.get(region, {}).items() if k in FAILOVER_SAYS}
    entries[region] = entry | said
    save_standbys(root, entries)
    tables = ", ".join(sorted(entry["tables"]))
    print(f"{root / SETTINGS_FILE}: the standby in {region} reads {tables} there.")
    first = f"Next: npx cdk deploy --all. Home's database stack replicates the roles' secrets to {region}"
    if own:
        print(f"{first} first; then {prefix}-standby-{region} deploys with its mappings disabled. Your "
              f"database must admit {args.subnets}.")  # fmt: skip
    else:
        print(f"{first} and makes its Aurora cluster the primary of an Aurora Global Database; then "
              f"{prefix}-standby-{region}-database adds a secondary cluster there (Aurora copies the data: "
              f"this can take hours for a large database), and {prefix}-standby-{region} deploys with its "
              "mappings disabled.")  # fmt: skip
    return 0


def standbys(root: Path) -> dict[str, Any]:
    """cdk.json's standby entries, by Region."""
    return dict(cdk_context(root).get("standby") or {})


def save_standbys(root: Path, entries: dict[str, Any]) -> None:
    """cdk.json with its context's `standby` replaced, the rest as it was (written whole, atomically)."""
    path = root / SETTINGS_FILE
    settings = json.loads(path.read_text()) if path.is_file() else {}
    settings.setdefault("context", {})["standby"] = dict(sorted(entries.items()))
    staged = path.with_suffix(".json.tmp")
    staged.write_text(json.dumps(settings, indent=2) + "\n")
    staged.replace(path)


def _entry(model: Any, data_stack: str, database_stack: str, home: str, region: str) -> dict[str, Any]:
    """What the standby in `region` is built from, read from the deployed app."""
    from botocore.exceptions import ClientError

    from hybridsync.cdk.data import title
    from hybridsync.runtime import aws
    from hybridsync.sql import roles

    stacks = aws.client("cloudformation", region=home)
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for name in (data_stack, database_stack)
        for o in stacks.describe_stacks(StackName=name)["Stacks"][0].get("Outputs", [])
    }
    dynamodb = aws.client("dynamodb", region=region)
    tables: dict[str, dict[str, str]] = {}
    for table in model.tables:
        name = _output(outputs, f"{title(table.name)}TableName", data_stack)
        try:
            described = dynamodb.describe_table(TableName=name)["Table"]
        except ClientError as error:
            if error.response["Error"]["Code"] == "ResourceNotFoundException":
                continue  # no replica there: the standby does not read it
            raise
        if described["TableStatus"] != "ACTIVE":
            raise SystemExit(f"hybridsync standby: {name} in {region} is {described['TableStatus']}: "
                             "run again once the replica is ACTIVE")  # fmt: skip
        tables[table.name] = {"name": name} | (
            {"stream_arn": described["LatestStreamArn"]} if table.stream else {}
        )
    if not tables:
        raise SystemExit(f"hybridsync standby: no table of {data_stack} has a replica in {region}")
    secrets = {}
    for role in roles.ROLES:  # a replica secret: the primary's ARN but the Region (Secrets Manager,
        # "Replicate secrets across Regions")
        arn = _output(outputs, f"{role.title()}SecretArn", database_stack).split(":")
        secrets[role] = ":".join([*arn[:3], region, *arn[4:]])
    bucket = next((v for k, v in outputs.items() if k.startswith("BodiesBucketName")), None)
    return {"tables": tables, "secrets": secrets} | ({"bodies_bucket": bucket} if bucket else {})


def _output(outputs: dict[str, str], key: str, stack: str) -> str:
    value = next((v for k, v in outputs.items() if k.startswith(key)), None)
    if value is None:
        raise SystemExit(f"hybridsync standby: {stack} has no output {key}: deploy this version of the app "
                         "to home first")  # fmt: skip
    return value
