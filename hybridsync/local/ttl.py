"""TTL, locally: items past their TTL attribute are deleted, as DynamoDB's background process does,
and the stream records of those deletions carry the DynamoDB service's `userIdentity`, as real
TTL deletions do (so the write-back's filters and code tell them from a user's delete)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from hybridsync import store
from hybridsync.records import DYNAMODB_SERVICE

TTL_IDENTITY = {"type": "Service", "principalId": DYNAMODB_SERVICE}
REMEMBER_S = 600  # how long a sweep's deletions wait for their stream records


class TtlSweeper:
    def __init__(self, client: Any, table: str, attribute: str, key_attributes: list[str]):
        self.client, self.table, self.attribute, self.key_attributes = (
            client,
            table,
            attribute,
            key_attributes,
        )
        self.deleted = 0
        self._swept: dict[str, float] = {}  # the deleted items' keys (stream JSON) -> when
        self._lock = threading.Lock()

    def sweep(self) -> int:
        """Delete what has expired (unless a write renewed it meanwhile); returns how many."""
        now = int(time.time())
        names = {"#ttl": self.attribute} | {f"#k{n}": k for n, k in enumerate(self.key_attributes)}
        expired = store.pages(
            self.client, "scan", TableName=self.table, FilterExpression="#ttl < :now",
            ProjectionExpression=", ".join(n for n in names if n.startswith("#k")),
            ExpressionAttributeNames=names, ExpressionAttributeValues={":now": {"N": str(now)}},
        )  # fmt: skip
        count = 0
        for page in expired:
            for key in page["Items"]:
                with self._lock:  # remembered first: the stream record may be read at once
                    self._swept[self._key(key)] = time.monotonic()
                try:
                    self.client.delete_item(
                        TableName=self.table, Key=key, ConditionExpression="#ttl < :now",
                        ExpressionAttributeNames={"#ttl": self.attribute},
                        ExpressionAttributeValues={":now": {"N": str(now)}},
                    )  # fmt: skip
                    count += 1
                except self.client.exceptions.ConditionalCheckFailedException:
                    with self._lock:
                        self._swept.pop(self._key(key), None)
        self.deleted += count
        return count

    def mark(self, record: dict[str, Any]) -> dict[str, Any]:
        """Give a REMOVE record of a swept item the service's identity (every mapping sees it)."""
        if record.get("eventName") == "REMOVE":
            with self._lock:
                cutoff = time.monotonic() - REMEMBER_S
                for key in [k for k, at in self._swept.items() if at < cutoff]:
                    del self._swept[key]
                if self._key(record["dynamodb"].get("Keys", {})) in self._swept:
                    record["userIdentity"] = dict(TTL_IDENTITY)
        return record

    @staticmethod
    def _key(key: dict[str, Any]) -> str:
        return json.dumps(key, sort_keys=True)

    def run(self, stop: threading.Event, every_s: float) -> None:
        while not stop.wait(every_s):
            self.sweep()
