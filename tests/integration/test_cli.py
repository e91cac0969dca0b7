"""The operator commands against the session's local stack."""

from __future__ import annotations

import pytest

from hybridsync import cli
from hybridsync.sync import writeback


@pytest.fixture
def env(handler_env):
    return handler_env


def test_model_prints_every_table_and_index(capsys):
    assert cli.main(["model"]) == 0
    out = capsys.readouterr().out
    for name in ("OrdersByTime", "OpenOrders", "Rankings", "Inverted", "DistinctKeys", "OrderLine"):
        assert name in out


def test_reconcile_reports_drift_and_repairs_it(env, engine, workload, stream, capsys):
    oid = workload.id("o")
    workload.order(oid)  # in DynamoDB, never written back: drift
    stream.read()
    assert cli.main(["reconcile"]) == 1
    assert "missing" in capsys.readouterr().out
    cli.main(["reconcile", "--repair"])
    assert "repaired" in capsys.readouterr().out
    with engine.connect() as conn:
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM orders WHERE order_id = %s", (oid,)).scalar_one() == 1
        )


def test_dead_letters_list_and_redrive(env, engine, workload, stream, capsys):
    workload.order(workload.id("o"))
    (record,) = stream.read()
    record["dynamodb"]["NewImage"].pop("Version")
    writeback.write_back([record], engine)
    assert cli.main(["dead-letters", "list", "--source", "write_back"]) == 0
    assert "Version must be" in capsys.readouterr().out
    assert cli.main(["dead-letters", "redrive", "--source", "write_back"]) == 1  # still bad
    assert "still rejected" in capsys.readouterr().out


def test_rankings_commands_validate_and_print(env, workload, capsys):
    workload.put("PlayerScore", PlayerId=workload.id("pl"), Score=42)
    assert cli.main(["leaderboard", "--top", "3"]) == 0
    assert "1." in capsys.readouterr().out
    assert cli.main(["top-sellers", "--day", "2026-11-22", "--n", "5"]) == 0
    with pytest.raises(SystemExit, match="day must look like"):
        cli.main(["top-sellers", "--day", "22.11.2026"])
    with pytest.raises(SystemExit, match="n must be between 1 and 100"):
        cli.main(["leaderboard", "--top", "500"])


def test_db_commands_need_a_database(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(SystemExit, match="DATABASE_URL"):
        cli.main(["db", "current"])
