"""The app's DynamoDB Streams API, moto's `responses` to dynamodb/models.py's state: `StreamsServer`
answers DescribeStream, GetShardIterator, GetRecords (the rest passes through to DynamoDB Local) over
the sharded topologies, so the failure-queue redrive and any boto3 client read the shards a mapping
reads; else DynamoDB Local's own records with what the platform adds to them."""

from __future__ import annotations

import base64
import json
import logging
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hybridsync.local.dynamodb.models import Topology, TrimmedDataAccess
from hybridsync.local.dynamodb.streams import PAGE
from hybridsync.local.dynamodb.ttl import Expiries

log = logging.getLogger(__name__)


def _ours(iterator: str) -> str | None:
    """The stream ARN of one of our shard iterators; None for one we did not give out."""
    try:
        return str(json.loads(base64.b64decode(iterator))[0])
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def _wire(record: dict[str, Any]) -> dict[str, Any]:
    """A delivered record as GetRecords sends it: no `eventSourceARN`, and a TTL deletion's identity
    spelled as the Streams API spells it (`Type`, `PrincipalId`; Lambda's events lower-case them)."""
    wired = {k: v for k, v in record.items() if k != "eventSourceARN"}
    if identity := wired.get("userIdentity"):
        wired["userIdentity"] = {key[0].upper() + key[1:]: value for key, value in identity.items()}
    return wired


class StreamsServer:
    """The DynamoDB Streams API of the app: over the topologies (by stream ARN) where the streams
    are sharded, else DynamoDB Local's own records with what the platform adds to them (`expiries`:
    the identity of a TTL deletion); other requests go to DynamoDB Local unchanged. Serves
    127.0.0.1 on a free port: `endpoint`."""

    def __init__(self, topologies: dict[str, Topology], upstream: str, expiries: Expiries | None = None):
        self.topologies, self.upstream, self.expiries = topologies, upstream, expiries
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                status, answer = server.answer(target.rpartition(".")[2], body, dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True, name="streams-api").start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    @staticmethod
    def _error(code: str, message: str, status: int = 400) -> tuple[int, bytes]:
        return status, json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}",
                                   "message": message}).encode()  # fmt: skip

    def answer(self, operation: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        request = json.loads(body or b"{}")
        arn = request.get("StreamArn")
        if operation == "GetRecords":
            iterator = str(request.get("ShardIterator", ""))
            # DynamoDB Local's iterators begin with the stream's ARN; ours are base64 JSON
            arn = iterator.split("|")[0] if iterator.startswith("arn:") else _ours(iterator)
        topology = self.topologies.get(arn or "")
        if topology is None or operation not in ("DescribeStream", "GetShardIterator", "GetRecords"):
            status, answer = self._forward(body, headers)
            if operation == "GetRecords" and status == 200 and arn:
                answer = self._marked(arn, answer)
            return status, answer
        try:
            if operation == "DescribeStream":
                upstream = json.loads(self._forward(body, headers)[1])["StreamDescription"]
                upstream["Shards"] = topology.describe()
                upstream.pop("LastEvaluatedShardId", None)
                return 200, json.dumps({"StreamDescription": upstream}).encode()
            if operation == "GetShardIterator":
                iterator = topology.iterator(
                    request["ShardId"], request["ShardIteratorType"], request.get("SequenceNumber")
                )
                return 200, json.dumps({"ShardIterator": iterator}).encode()
            records, following = topology.records(request["ShardIterator"], int(request.get("Limit", PAGE)))
            answer: dict[str, Any] = {"Records": [_wire(r) for r in records]}
            if following:
                answer["NextShardIterator"] = following
            return 200, json.dumps(answer).encode()
        except KeyError as missing:
            return self._error("ResourceNotFoundException", f"Requested resource not found: Shard {missing}")
        except TrimmedDataAccess:
            return self._error(
                "TrimmedDataAccessException",
                "The operation attempted to read past the oldest stream record in a shard.",
            )

    def _marked(self, arn: str, answer: bytes) -> bytes:
        """A page of DynamoDB Local's records with what the platform adds (a TTL deletion's identity)."""
        if self.expiries is None or not self.expiries.covers(arn):
            return answer
        page = json.loads(answer)
        page["Records"] = [self.expiries.mark(arn, record) for record in page.get("Records", [])]
        return json.dumps(page).encode()

    def _forward(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        keep = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
        request = urllib.request.Request(self.upstream, data=body, headers=keep, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
