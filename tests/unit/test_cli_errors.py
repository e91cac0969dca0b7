"""A mistake the user can fix is one sentence, not a traceback: an app that stopped under a shell
still holding its `.local/env`, a misspelt flag, the version asked for."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa
from botocore.exceptions import EndpointConnectionError

from hybridsync import cli
from hybridsync.cli import local

REFUSED = 'connection failed: connection to server at "127.0.0.1", port 38515 failed: Connection refused'


def failing(monkeypatch, error: BaseException) -> None:
    """`hybridsync status` fails with `error`, as any command meeting it would."""

    def run(_: object) -> int:
        raise error

    monkeypatch.setattr(local, "_status", run)


@pytest.mark.parametrize(
    "error, said",
    [
        (
            sa.exc.OperationalError("SELECT 1", {}, psycopg.OperationalError(REFUSED)),
            "PostgreSQL at 127.0.0.1:38515",
        ),
        (psycopg.OperationalError(REFUSED), "PostgreSQL at 127.0.0.1:38515"),
        (
            EndpointConnectionError(endpoint_url="http://127.0.0.1:41234/"),
            "DynamoDB at http://127.0.0.1:41234/",
        ),
    ],
)
def test_a_stopped_local_app_is_one_sentence(monkeypatch, error, said):
    monkeypatch.setenv("DYNAMODB_ENDPOINT", "http://127.0.0.1:41234")
    failing(monkeypatch, error)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["status"])
    assert str(stopped.value) == (
        f"hybridsync status: {said} does not answer: is `hybridsync up` running? (each start picks new "
        "ports: `source .local/env` again after a restart)"
    )


def test_an_endpoint_elsewhere_is_not_blamed_on_the_local_app(monkeypatch):
    failing(monkeypatch, EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com/"))
    with pytest.raises(SystemExit, match=r"does not answer: check the address, the network"):
        cli.main(["status"])


def test_an_error_the_database_answered_is_not_hidden(monkeypatch):
    failing(monkeypatch, psycopg.errors.DeadlockDetected("deadlock detected"))
    with pytest.raises(psycopg.errors.DeadlockDetected):
        cli.main(["status"])


@pytest.mark.parametrize(
    "argv, said",
    [
        (["up", "--onse"], "hybridsync up: error: unrecognized arguments: --onse (did you mean --once?)"),
        (
            ["up", "--prot=8080"],
            "hybridsync up: error: unrecognized arguments: --prot=8080 (did you mean --port?)",
        ),
        (["stauts"], "(did you mean status?)"),
        (["up", "--zzzzzz"], "hybridsync up: error: unrecognized arguments: --zzzzzz\n"),
    ],
)
def test_a_misspelt_flag_or_command_gets_the_likeliest_one(capsys, argv, said):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stopped:
        cli.main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"hybridsync {version('hybridsync')}\n"
