"""TTL, locally, for every expired item, with the DynamoDB service's identity on its REMOVE record.

AWS deletes an item once the Number in its TTL attribute is an epoch second in the past (within
about two days: UpdateTimeToLive's reference), and the stream record of that deletion carries
`userIdentity` {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"} (the Streams API's
Identity, "For Time To Live, the principalId is dynamodb.amazonaws.com"), which is how consumers
tell it from a user's delete. DynamoDB Local does the same, except for an item lacking a key
attribute of any GSI of its table: it never expires those (measured; on a table of sparse indexes,
most items). `TtlSweeper` deletes what it leaves (a conditional DeleteItem: only while the item
still holds the expiry it was found with), and `Expiries` remembers those deletions, so that every
reader of the app's streams (the mappings, `StreamsServer`, any boto3 client pointed at it) sees
their REMOVE records with the service's identity, as AWS's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from hybridsync.streams.records import DYNAMODB_SERVICE, json_default, table_of_arn

log = logging.getLogger(__name__)
SERVICE = {"Type": "Service", "PrincipalId": DYNAMODB_SERVICE}  # as the Streams API spells it
SWEEP_S = 15.0  # AWS takes up to days; locally an expired item goes within this
SETTLE_S = 5.0  # how long a reader waits for a deletion in flight to say whether it happened

Deletion = tuple[str, str, str]  # table, its key (DynamoDB JSON, canonical), the expiry it held


def _key(keys: dict[str, Any]) -> str:
    return json.dumps(keys, sort_keys=True, default=json_default)


def _line(deletion: Deletion, at: float) -> str:
    table, key, expires = deletion
    return json.dumps({"table": table, "key": key, "expires": expires, "at": at}) + "\n"


class Expiries:
    """The deletions the sweepers made, kept as long as the stream keeps their records (in `path`,
    so a restarted app still marks records written before it stopped). A deletion is pending while
    its DeleteItem is in flight: a reader meeting its record waits for the outcome."""

    def __init__(self, path: Path | None = None, keep_s: float = 24 * 3600):
        self.path, self.keep_s = path, keep_s
        self.attributes: dict[str, str] = {}  # table -> its TTL attribute
        self._done: dict[Deletion, float] = {}  # -> when
        self._pending: set[Deletion] = set()
        self._changed = threading.Condition()
        if path is not None and path.is_file():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                self._done[(entry["table"], entry["key"], entry["expires"])] = entry["at"]
        self.prune()

    def prune(self) -> None:
        """Forget deletions older than the stream keeps records, and rewrite the file without them
        (once a sweep: each deletion itself is one appended line)."""
        with self._changed:
            horizon = time.time() - self.keep_s
            self._done = {d: at for d, at in self._done.items() if at > horizon}
            if self.path is None:
                return
            staged = self.path.with_suffix(".tmp")
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_text("".join(_line(d, at) for d, at in self._done.items()))
            staged.replace(self.path)

    def begin(self, deletion: Deletion) -> None:
        with self._changed:
            self._pending.add(deletion)

    def end(self, deletion: Deletion, deleted: bool) -> None:
        with self._changed:
            self._pending.discard(deletion)
            if deleted:
                self._done[deletion] = time.time()
                if self.path is not None:
                    with self.path.open("a") as file:
                        file.write(_line(deletion, self._done[deletion]))
            self._changed.notify_all()

    def mark(self, stream_arn: str, record: dict[str, Any]) -> dict[str, Any]:
        """The record (a Streams API record, as boto3 or the wire has it), with the service's
        identity if it is the REMOVE of a deletion a sweeper made."""
        if record.get("eventName") != "REMOVE" or record.get("userIdentity"):
            return record
        table = table_of_arn(stream_arn)
        attribute = self.attributes.get(table)
        data = record.get("dynamodb") or {}
        expires = ((data.get("OldImage") or {}).get(attribute) or {}).get("N") if attribute else None
        if expires is None:
            return record
        deletion = (table, _key(data.get("Keys") or {}), expires)
        with self._changed:
            self._changed.wait_for(lambda: deletion not in self._pending, timeout=SETTLE_S)
            if deletion in self._done:
                record["userIdentity"] = dict(SERVICE)
        return record

    def covers(self, stream_arn: str) -> bool:
        """Whether any record of this stream may need marking (else it passes untouched)."""
        return ":table/" in stream_arn and table_of_arn(stream_arn) in self.attributes


class TtlSweeper:
    """Deletes a table's expired items, as AWS's TTL does."""

    def __init__(self, client: Any, table: str, attribute: str, keys: list[str], expiries: Expiries):
        self.client, self.table, self.attribute = client, table, attribute
        self.key_attributes, self.expiries = keys, expiries
        expiries.attributes[table] = attribute

    def sweep(self) -> int:
        """One pass: every item whose TTL attribute holds a Number of the past, deleted unless it
        changed meanwhile; returns how many were deleted."""
        names = {"#t": self.attribute} | {f"#k{n}": k for n, k in enumerate(self.key_attributes)}
        request = {
            "TableName": self.table,
            "FilterExpression": "attribute_type(#t, :number) AND #t < :now",
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":number": {"S": "N"}, ":now": {"N": str(int(time.time()))}},
        }
        deleted = 0
        self.expiries.prune()
        for page in self.client.get_paginator("scan").paginate(**request):
            for item in page["Items"]:
                expires = item[self.attribute]["N"]
                keys = {k: item[k] for k in self.key_attributes}
                deletion = (self.table, _key(keys), expires)
                self.expiries.begin(deletion)
                done = False
                try:
                    self.client.delete_item(
                        TableName=self.table, Key=keys, ConditionExpression="#t = :seen",
                        ExpressionAttributeNames={"#t": self.attribute},
                        ExpressionAttributeValues={":seen": {"N": expires}},
                    )  # fmt: skip
                    done = True
                    deleted += 1
                except self.client.exceptions.ConditionalCheckFailedException:
                    pass  # renewed, or deleted meanwhile (by DynamoDB Local's own TTL, or a user)
                finally:
                    self.expiries.end(deletion, done)
        return deleted

    def run(self, stop: threading.Event, every_s: float = SWEEP_S) -> None:
        while not stop.wait(every_s):
            try:
                self.sweep()
            except Exception:
                log.exception("TTL sweep of %s", self.table)
