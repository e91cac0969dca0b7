"""A stack's Delete, a rollback's included, never needs the database: the deploy-time steps that log
in (the logins, the schema) answer it without connecting, so a stack whose database is gone or
unreachable can still be rolled back or deleted."""

import pytest

from tests.handlers import LambdaContext, load


@pytest.mark.parametrize("name", ["migrate", "users"])
def test_a_stack_delete_needs_no_database(name, monkeypatch):
    # nowhere to connect to (TEST-NET-1): a connection attempt would fail the Delete
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://nobody@192.0.2.1:1/none?connect_timeout=1")
    handler = load(name).handler
    answer = handler({"RequestType": "Delete", "PhysicalResourceId": "x"}, LambdaContext(function_name=name))
    assert answer["PhysicalResourceId"]
