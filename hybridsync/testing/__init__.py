"""hybridsync's pytest plugin (registered as `hybridsync` when hybridsync is installed): fixtures
for a project's model and a local stack (AWS's DynamoDB Local, moto server for S3 and SQS,
embedded PostgreSQL at the revisions' heads), and sample values of any entity. The contract suite
(`hybridsync.testing.contract`) is built on them; a project's tests are one import of it:

    from hybridsync.testing.contract import *  # noqa: F403

A test module may set `HYBRIDSYNC_MODEL = "pkg.module:MODEL"` to run over another model than the
project's; a conftest may provide `hybridsync_servers` (running servers) to share its own. Never
shipped to Lambda."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hybridsync.model import config, keys
from hybridsync.model.declare import Entity, Field, FieldType, Model

if TYPE_CHECKING:
    from hybridsync import local

_databases: dict[str, str] = {}


@pytest.fixture(scope="module")
def hybridsync_spec(request: pytest.FixtureRequest) -> str:
    """The model the module's tests are about: its `HYBRIDSYNC_MODEL`, else the project's."""
    return config.model_spec(getattr(request.module, "HYBRIDSYNC_MODEL", None))


@pytest.fixture(scope="module")
def hybridsync_model(hybridsync_spec: str) -> Model:
    return config.model(hybridsync_spec)


@pytest.fixture(scope="session")
def hybridsync_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local.LocalStack]:
    """DynamoDB Local, moto server and an embedded PostgreSQL for the session (or the endpoints in
    DYNAMODB_ENDPOINT, AWS_ENDPOINT, DATABASE_URL), with no tables and no schema of their own."""
    from hybridsync import local

    state = tmp_path_factory.mktemp("hybridsync")
    with local.start(state, "contract", tables=False, migrate=False) as stack:
        yield stack


@pytest.fixture(scope="module")
def hybridsync_database(hybridsync_servers: local.LocalStack, hybridsync_spec: str) -> local.LocalStack:
    """The servers with the model's tables (named `<prefix>-<table>`, a prefix of their own) and a
    database of its own migrated to the revisions' heads: the engine's branch and the model's."""
    import sqlalchemy as sa

    from hybridsync.runtime import db
    from hybridsync.sql import migrations

    servers = hybridsync_servers
    if hybridsync_spec not in _databases:
        name = f"contract_{uuid.uuid4().hex[:8]}"
        engine = db.create_engine(servers.database_url)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        url = sa.make_url(db.sqlalchemy_url(servers.database_url)).set(database=name)
        _databases[hybridsync_spec] = url.render_as_string(hide_password=False)
        migrations.upgrade(_databases[hybridsync_spec], spec=hybridsync_spec)
    model = config.model(hybridsync_spec)
    stack = servers.with_tables(f"c{uuid.uuid4().hex[:6]}", model=model)
    stack.database_url = _databases[hybridsync_spec]
    return stack


_counter = itertools.count(1)


def sample_values(entity: Entity, n: int | None = None, **given: Any) -> dict[str, Any]:
    """Values for every field of `entity` (its version too, when it has one), the `n`th of a kind:
    strings within their length, numbers, ISO-8601 times in the past days, booleans, maps, bytes.
    `given` values are kept."""
    n = next(_counter) if n is None else n
    values = {f.attribute: _sample(f, n) for f in entity.all_fields if f.attribute != entity.names.version}
    if entity.versioned:
        values[entity.names.version] = 1_700_000_000_000 + n
    return values | given


def _sample(f: Field, n: int) -> Any:
    if f.type is FieldType.STRING:
        text = f"{f.attribute[:8].lower()}-{n}"
        return text[-(f.max_length or len(text)) :]
    if f.type is FieldType.INTEGER:
        return n
    if f.type is FieldType.DECIMAL:
        return Decimal(n) + Decimal("0.25")
    if f.type is FieldType.TIMESTAMP:
        return keys.iso_ms(datetime(2026, 11, 22, tzinfo=UTC) - timedelta(hours=n))
    if f.type is FieldType.BOOLEAN:
        return n % 2 == 0
    if f.type is FieldType.JSON:
        return {"n": Decimal(n), "tags": ["a", "b"]}
    return bytes([n % 256]) * 4  # BINARY


def root() -> Path:
    """The project's folder (where its pyproject.toml names the model)."""
    return config.project_root() or Path.cwd()
