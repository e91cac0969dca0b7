"""Secrets never reach a log line: the database password, read from Secrets Manager as in AWS,
through a run that fails to reach the database and logs its traceback."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from tests.handlers import http, load
from tests.integration.conftest import use_database_secret

pytestmark = pytest.mark.integration

PASSWORD = f"pw-{uuid.uuid4().hex}-never-logged"


@pytest.fixture
def secret_env(handler_env, stack, monkeypatch):
    """The AWS way in: DB_SECRET_ARN (a JSON secret on moto's Secrets Manager), no DATABASE_URL;
    the database behind it is unreachable, so every SQL path fails and logs why."""
    value = {"username": "app", "password": PASSWORD, "host": "127.0.0.1", "port": 1, "dbname": "x"}
    return use_database_secret(stack, monkeypatch, json.dumps(value))


def test_the_password_never_reaches_a_log_line(secret_env, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    api = load("api")
    status, body, _ = http(api, "GET", f"/customers/c-{uuid.uuid4().hex[:6]}")
    assert status == 503 and PASSWORD not in json.dumps(body)  # the SQL path really ran and failed
    status, _, _ = http(api, "PUT", "/customers/c-1", body={"Name": "A", "Email": "a@example.com"})
    assert status == 503
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    out, err = capfd.readouterr()
    assert "database unavailable" in logged  # the failure was logged, with its traceback
    for text in (logged, out, err):
        assert PASSWORD not in text


def test_the_doctor_logs_in_through_the_reader_endpoint_a_standby_names(handler_env, stack, monkeypatch):
    """A standby's secondary Aurora cluster has no writer its proxy's read/write endpoint reaches
    until a failover: the failover proves the standby's login first through the read-only endpoint
    (`DB_READER_HOST`, the doctor's probe with "database": "reader"). Here the function's own host
    answers nothing (the read/write endpoint), the reader host is the server."""
    import sqlalchemy as sa

    from hybridsync.runtime import doctor

    server = sa.make_url(stack.database_url)
    host = server.host or server.query["host"]
    secret = {"username": server.username, "password": server.password, "host": "127.0.0.2",
              "port": server.port or 5432, "dbname": server.database}  # fmt: skip
    use_database_secret(stack, monkeypatch, json.dumps(secret))
    monkeypatch.setenv("DB_SSLROOTCERT", str(server.query["sslrootcert"]))  # the local server's CA
    monkeypatch.setenv("DB_READER_HOST", str(host))
    answer = doctor.probe({"hybridsync": "doctor", "database": "reader"})["database"]
    assert answer["outcome"] == "connected", answer
    assert doctor.probe({"hybridsync": "doctor", "database": True})["database"]["outcome"] == "unreachable"
    monkeypatch.delenv("DB_READER_HOST")
    refused = doctor.probe({"hybridsync": "doctor", "database": "reader"})["database"]
    assert refused["outcome"] == "refused" and "no DB_READER_HOST" in refused["detail"]
