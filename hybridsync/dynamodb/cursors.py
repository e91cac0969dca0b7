"""Page cursors: opaque, signed, and bound to the query they continue.

A cursor is the page's `LastEvaluatedKey` (url-safe base64 JSON) and an HMAC-SHA256 of it together
with the request it answers (route, path parameters and query, `limit` and `cursor` aside). A
forged cursor, one of another route or another query, or a key edited by hand fails the signature:
a 400 naming `cursor`, never an `ExclusiveStartKey` DynamoDB refuses (a 500 before).

The key is derived from the database credential the API function already holds (rotating it
makes outstanding cursors invalid: a client starts the listing again). Where there is none (a
unit test, a tool) the process makes one at random: its cursors are valid in that process only.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from hybridsync.model.errors import ConfigurationError, Invalid

_binding: ContextVar[str] = ContextVar("cursor_binding", default="")
MAX_CURSOR = 4096  # characters: two 2 KB keys and their names fit well within


@contextmanager
def bound(binding: str) -> Iterator[None]:
    """Cursors made and read inside belong to this request (`web.route` binds every route's)."""
    token = _binding.set(binding)
    try:
        yield
    finally:
        _binding.reset(token)


@functools.cache
def _key() -> bytes:
    """The key cursors are signed with: the stacks' `CURSOR_KEY_SECRET_ARN` (one secret every API
    container shares; its functions log in with IAM tokens, which differ per connection), else the
    database URL's credentials (local tools, tests), else one of this process's own."""
    from hybridsync.runtime.settings import database_url  # lazily: DynamoDB-only callers

    if arn := os.environ.get("CURSOR_KEY_SECRET_ARN", "").strip():
        from aws_lambda_powertools.utilities import parameters

        credential = str(parameters.get_secret(arn, max_age=3600))
    else:
        try:
            credential = database_url()
        except ConfigurationError:
            return secrets.token_bytes(32)
    return hashlib.sha256(b"hybridsync page cursors\n" + credential.encode()).digest()


def _signature(payload: str) -> str:
    mac = hmac.new(_key(), f"{_binding.get()}\n{payload}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac[:18]).decode()


def encode(last_key: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(last_key, separators=(",", ":")).encode()).decode()
    return f"{payload}.{_signature(payload)}"


def decode(cursor: str) -> dict[str, Any]:
    """The key a cursor continues after; Invalid("cursor") for any cursor this request did not get."""
    payload, _, signature = cursor.rpartition(".")
    if len(cursor) > MAX_CURSOR or not payload or not hmac.compare_digest(signature, _signature(payload)):
        raise Invalid("cursor", "cursor is not one this API gave out for this request")
    try:
        start = json.loads(base64.urlsafe_b64decode(payload.encode()))
    except (ValueError, binascii.Error):
        raise Invalid("cursor", "cursor is not one this API gave out for this request") from None
    return start
