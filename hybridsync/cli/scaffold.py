"""`hybridsync init DIR`: a working project in an empty folder. Its model declares one entity
mastered in DynamoDB (written back to PostgreSQL), one mastered in PostgreSQL (cached in DynamoDB
through the outbox) and one ranked aggregate; its first migration is generated from that model;
a seed writes through the real write paths; its tests are the engine's contract suite."""

from __future__ import annotations

import keyword
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from hybridsync import __version__


class Refused(ValueError):
    """The folder or the package name cannot hold a new project."""


def _version() -> str:
    try:
        return metadata.version("hybridsync")
    except metadata.PackageNotFoundError:
        return __version__


PYPROJECT = """\
[project]
name = "{package}"
version = "0.1.0"
description = "DynamoDB in front of PostgreSQL, kept in sync by hybridsync"
requires-python = ">=3.11"
dependencies = ["hybridsync>={version}"]

[tool.hybridsync]
model = "{package}.model:MODEL"    # the one declaration everything renders from
seed = "{package}.seed:seed"       # what `hybridsync up --seed` writes
routes = ["{package}.routes"]      # HTTP routes of the API function

[tool.pytest.ini_options]
pythonpath = ["."]
testpaths = ["tests"]
addopts = "-ra"
"""

APP = '''\
"""The CDK app: `npx cdk synth` and `npx cdk deploy` run this file (cdk.json's "app").

hybridsync builds the stacks of the model `pyproject.toml` names ([tool.hybridsync] model): data,
database, pipeline, api and monitoring. Constructs of your own go between build and synth."""

from hybridsync.cdk import App, build, synth_or_exit  # App: aws_cdk's, Node started quietly

app = App()
stacks = build(app)  # {"data": ..., "database": ..., "pipeline": ..., "api": ..., "monitoring": ...}
synth_or_exit(app)  # checks the templates against what AWS documents; exits naming each finding
'''

CDK_JSON = """\
{{
  "app": "python3 app.py",
  "context": {{
    "prefix": "{title}",
    "dev": false,
    "tracing": true,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": true,
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
    "@aws-cdk/core:checkSecretUsage": true,
    "@aws-cdk/aws-iam:minimizePolicies": true,
    "@aws-cdk/core:enablePartitionLiterals": true,
    "@aws-cdk/aws-rds:databaseProxyUniqueResourceName": true,
    "@aws-cdk/customresources:installLatestAwsSdkDefault": false
  }}
}}
"""

PACKAGE_JSON = """\
{{
  "name": "{package}",
  "private": true,
  "description": "the CDK CLI, pinned: npm install, then npx cdk synth | deploy",
  "devDependencies": {{"aws-cdk": "{cdk}"}}
}}
"""

MODEL = '''\
"""The model of {package}: everything hybridsync does for this project (the CDK stacks, the
functions, the local app, the SQL schema and its migrations, the stream filters, every key) is
rendered from this one declaration. Change it, then:

    hybridsync migrations generate -m "what changed"   # the next revision, outbox triggers included
    hybridsync up --seed --once                        # run it all locally and check both sides
    python -m pytest                                   # the contract suite, over what you declared
"""

from hybridsync.model.declare import (
    NEW_AND_OLD_IMAGES, Aggregate, Count, Copy, Entity, Field, FieldType, Index, KeyAttribute, Model,
    Period, Projection, Rank, Side, Sum, Table, Template, Where,
)

# One table for every entity (single-table design). Key attributes are named as you like; the
# stream feeds the write-back and the aggregation; the TTL attribute expires cached views.
DATA = Table(
    "data",
    partition=KeyAttribute("pk"),
    sort=KeyAttribute("sk"),
    stream=NEW_AND_OLD_IMAGES,
    ttl_attribute="expires_at",
    purpose="every entity, as item collections keyed <Entity>#<id>",
    indexes=(
        # A ranked aggregate's top-N: its items carry a write-sharded partition and the ranked
        # measure as the sort key (a sparse index: nothing else carries these attributes).
        Index("Ranking", KeyAttribute("rank_pk"), KeyAttribute("rank_sk", "N"), Projection.ALL,
              "the top customers of a month by invoiced total"),
    ),
)

# Mastered in DynamoDB: written by the application there, written back to PostgreSQL (a row per
# invoice in `invoices`, deletes kept as tombstones), exactly as the stream delivers it.
INVOICE = Entity(
    "Invoice",
    DATA,
    Side.DYNAMODB,
    fields=(
        Field("InvoiceId", FieldType.STRING, max_length=64),
        Field("CustomerId", FieldType.STRING, max_length=64),
        Field("IssuedAt", FieldType.TIMESTAMP),
        Field("Amount", FieldType.DECIMAL),
        Field("Status", FieldType.STRING),  # OPEN, PAID or VOID
    ),
    keys={{"pk": Template("CUSTOMER#{{CustomerId}}"), "sk": Template("INVOICE#{{InvoiceId}}")}},
    sql_table="invoices",
    sql_key=("InvoiceId",),
    description="an invoice, kept in its customer's item collection",
)

# Mastered in PostgreSQL: written there (the outbox triggers record each change), cached in
# DynamoDB: read through the cache, populated on a miss, refreshed by the outbox drain.
CUSTOMER = Entity(
    "Customer",
    DATA,
    Side.POSTGRESQL,
    fields=(
        Field("CustomerId", FieldType.STRING, max_length=64),
        Field("Name", FieldType.STRING),
        Field("Email", FieldType.STRING),
    ),
    keys={{"pk": Template("CUSTOMER#{{CustomerId}}"), "sk": Template("PROFILE")}},
    sql_table="customers",
    sql_key=("CustomerId",),
    description="a customer's profile",
)

# A declared aggregate: the engine folds every invoice change into it exactly once (a replayed
# or retried batch changes nothing), subtracting what a modify or remove takes away.
TOTALS = Aggregate(
    "CustomerTotals",
    sources=(INVOICE,),
    where=Where("Status", none_of=("VOID",)),  # a voided invoice counts for nothing
    group_by=("CustomerId",),
    time="IssuedAt",
    periods=(Period.MONTH,),
    measures=(Sum("Total", of="Amount"), Count("Invoices")),
    partition="CUSTOMER#{{CustomerId}}",
    sort="TOTALS#{{Period}}",
    rank=Rank("Total", index="Ranking", prefix="TOTALS#{{Period}}", shards=4),
    description="what a customer was invoiced in a month, and how many invoices",
)

MODEL = Model(tables=(DATA,), entities=(INVOICE, CUSTOMER), aggregates=(TOTALS,))
'''

SEED = '''\
"""What `hybridsync up --seed` writes, through the real write paths: customers into PostgreSQL
(`hybridsync.rows`: the outbox carries them into DynamoDB), invoices into DynamoDB
(`hybridsync.writes`, the application-side write API: the stream carries them into PostgreSQL
and into the aggregate), then some changes of each kind. Returns how many writes."""

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from hybridsync import rows, writes
from hybridsync.model.keys import iso_ms

from {package}.model import CUSTOMER, INVOICE


def seed(app: Any, engine: sa.Engine, customers: int = 20, invoices: int = 200) -> int:
    rng = random.Random(7)
    with engine.begin() as conn:
        for n in range(customers):
            rows.upsert(conn, CUSTOMER, {{"CustomerId": f"c{{n}}", "Name": f"Customer {{n}}",
                                         "Email": f"c{{n}}@example.com"}})
    client, table = app.client, app.table_names["data"]
    now = datetime.now(UTC)
    issued = []
    for n in range(invoices):
        values = {{"InvoiceId": f"i{{n}}", "CustomerId": f"c{{rng.randrange(customers)}}", "Status": "OPEN",
                   "IssuedAt": iso_ms(now - timedelta(days=rng.randrange(60))),
                   "Amount": Decimal(rng.randint(100, 99_999)) / 100}}
        issued.append(writes.put(client, table, INVOICE, values))
    changed = rng.sample(issued, invoices // 4)
    for values in changed:  # paid, voided, corrected
        change = rng.choice([{{"Status": "PAID"}}, {{"Status": "VOID"}}, {{"Amount": values["Amount"] + 1}}])
        writes.put(client, table, INVOICE, values | change)
    deleted = rng.sample(issued, invoices // 20)
    for values in deleted:
        writes.delete(client, table, INVOICE, values)
    with engine.begin() as conn:  # a customer renamed, one removed
        rows.update(conn, CUSTOMER, {{"CustomerId": "c0"}}, {{"Name": "Customer Zero"}})
        rows.delete(conn, CUSTOMER, {{"CustomerId": f"c{{customers - 1}}"}})
    return customers + len(issued) + len(changed) + len(deleted) + 2
'''

ROUTES = '''\
"""The HTTP routes of {package}'s API function (`[tool.hybridsync] routes`): an invoice written and
read in DynamoDB, a cached customer (cache-aside: DynamoDB, else PostgreSQL then DynamoDB) and the
month's top customers."""

from datetime import UTC, datetime

from aws_lambda_powertools.event_handler import Response

from hybridsync.api import openapi
from hybridsync.api.web import (
    app, as_field, body, cached, error, get, ident, period, respond, route, shown, table, top_n,
)
from hybridsync.dynamodb import store, writes
from hybridsync.model.convert import from_json
from hybridsync.reads import cache, rankings
from hybridsync.runtime.clients import dynamodb, engine

from {package}.model import CUSTOMER, INVOICE, TOTALS

INVOICE_FIELDS = ("IssuedAt", "Amount", "Status")
INVOICE_BODY = openapi.fields(INVOICE, INVOICE_FIELDS)
# what each route answers, the model's fields only, one JSON type per field type (`shown`)
INVOICE_SHOWN = openapi.shape(INVOICE)
TOP = openapi.listing(month={{"type": "string"}}, customers=openapi.array(openapi.shape(TOTALS.entity)))


@route("PUT", "/customers/<customer_id>/invoices/<invoice_id>", body=INVOICE_BODY, returns=INVOICE_SHOWN)
def put_invoice(customer_id: str, invoice_id: str) -> Response:
    """Write an invoice in DynamoDB, its master: the stream carries it to PostgreSQL and into
    CustomerTotals."""
    values = from_json(INVOICE, body(), INVOICE_FIELDS)
    values["CustomerId"] = as_field(INVOICE, "CustomerId", customer_id, "customer id")
    values["InvoiceId"] = as_field(INVOICE, "InvoiceId", invoice_id, "invoice id")
    return respond(shown(INVOICE, writes.put(dynamodb(), table(), INVOICE, values)))


@get("/customers/<customer_id>/invoices/<invoice_id>", returns=INVOICE_SHOWN)
def get_invoice(customer_id: str, invoice_id: str) -> Response:
    """An invoice, read from DynamoDB."""
    key = {{"CustomerId": ident("customer id", customer_id), "InvoiceId": ident("invoice id", invoice_id)}}
    item = store.get(dynamodb(), table(), INVOICE.key(key))
    if item is None:
        return error(404, f"no invoice {{invoice_id!r}} of customer {{customer_id!r}}")
    return respond(shown(INVOICE, item))


@get("/customers/<customer_id>", returns=openapi.shape(CUSTOMER))
def customer(customer_id: str) -> Response:
    key = {{"CustomerId": ident("customer id", customer_id)}}
    found = cache.get(dynamodb(), table(), engine(), CUSTOMER, key)
    if found.item is None:
        return error(404, f"no customer {{customer_id!r}}", cached([found]))
    return respond(shown(CUSTOMER, found.item), cached([found]))


@get("/customers/top", returns=TOP)
def top_customers() -> Response:
    """The month's top customers by total (`?month=2026-11`; this month by default)."""
    this_month = datetime.now(UTC).strftime("%Y-%m")
    month = period(None, app.current_event.get_query_string_value("month", this_month))
    top = rankings.top_of(dynamodb(), table(), TOTALS, month, top_n())
    return respond({{"month": month, "customers": [shown(TOTALS.entity, row) for row in top]}})
'''

CONTRACT = '''\
"""The engine's contract suite, over this project's entities and aggregates: keys round-trip, a
stream image becomes the SQL row and back, the filters admit exactly the written-back entities,
every PostgreSQL-mastered table has its triggers, every aggregate equals a recount under generated
inserts, modifies and removes (replayed), and the migrations at head equal the model."""

from hybridsync.testing.contract import *  # noqa: F403
'''

GITIGNORE = ".local/\ncdk.out/\nnode_modules/\n__pycache__/\n*.egg-info/\n"


def write(directory: Path, package: str | None = None) -> list[Path]:
    """Write the project into `directory` (new, or empty) and generate its first migration; the
    paths written. `package` defaults to the folder's name, made a Python identifier."""
    package = package or re.sub(r"\W", "_", directory.resolve().name.lower()).strip("_")
    if not package.isidentifier() or keyword.iskeyword(package) or package in ("hybridsync", "tests"):
        raise Refused(f"{package!r} cannot be the project's package name: pass --package NAME")
    if directory.exists() and any(directory.iterdir()):
        raise Refused(
            f"{directory} is not empty: `hybridsync init` writes a new project into an empty folder"
        )
    title = "".join(part.title() for part in package.split("_"))
    files = {
        "pyproject.toml": PYPROJECT.format(package=package, version=_version()),
        "cdk.json": CDK_JSON.format(title=title),
        "app.py": APP,
        "package.json": PACKAGE_JSON.format(package=package.replace("_", "-"), cdk=_cdk_version()),
        ".gitignore": GITIGNORE,
        f"{package}/__init__.py": f'"""{package}: DynamoDB in front of PostgreSQL."""\n',
        f"{package}/model.py": MODEL.format(package=package),
        f"{package}/seed.py": SEED.format(package=package),
        f"{package}/routes.py": ROUTES.format(package=package),
        f"{package}/migrations/__init__.py": "",
        f"{package}/migrations/versions/__init__.py": "",
        "tests/__init__.py": "",
        "tests/test_contract.py": CONTRACT,
    }
    written = []
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    generated = subprocess.run(
        [sys.executable, "-m", "hybridsync.cli", "migrations", "generate", "-m", "initial schema"],
        cwd=directory,
        capture_output=True,
        text=True,
    )
    if generated.returncode:
        raise Refused(f"the first migration could not be generated:\n{generated.stderr[-3000:]}")
    written += sorted((directory / package / "migrations" / "versions").glob("0001_*.py"))
    return written


def _cdk_version() -> str:
    """The CDK CLI this project pins (the same as hybridsync's own), or a recent one."""
    return "2.1148.1"  # the version hybridsync's own package.json pins
