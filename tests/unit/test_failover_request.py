"""`hybridsync failover` hands the running `up` a request in its state folder (cli/failover.py):
refused at once where no app with Regions runs, and never taken by another `up` run than the one
it was written for, nor when it is malformed. No app runs here: the request file alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hybridsync.cli import failover, main
from hybridsync.local import running


def held(state: Path, replication: dict | None) -> None:
    """The folder as a running `up` (this process) keeps it: its pid file and status."""
    state.mkdir(exist_ok=True)
    (state / running.PID_FILE).write_text(f"{os.getpid()} {running.started(os.getpid())}")
    (state / "status.json").write_text(json.dumps({"replication": replication}))


def test_refused_at_once_where_no_app_runs_or_it_has_no_other_region(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no app is running from"):
        main(["failover", "--to", "us-west-2", "--state-dir", str(tmp_path)])
    held(tmp_path, None)
    with pytest.raises(SystemExit, match="has no other Region: start it with `hybridsync up --regions"):
        main(["failover", "--to", "us-west-2", "--state-dir", str(tmp_path)])
    assert not (tmp_path / failover.REQUEST).exists()


def test_a_request_of_another_up_run_is_dropped_and_a_malformed_one_answered(tmp_path):
    request, app = tmp_path / failover.REQUEST, object()
    request.write_text(json.dumps({"to": "us-west-2", "live": True, "said": [], "pid": os.getpid() + 1}))
    failover.take(tmp_path, [app], None, lambda _: None)
    assert not request.exists()  # left by an earlier `up`: never run by this one
    request.write_text(json.dumps({"to": 7, "pid": os.getpid()}))
    taken = [app]
    failover.take(tmp_path, taken, None, lambda _: None)
    assert "names `to` (a Region)" in json.loads(request.read_text())["error"] and taken == [app]


def test_status_says_a_hand_over_runs_and_its_last_step(tmp_path, capsys, monkeypatch):
    """The loop writes no status while the app is replaced: `hybridsync status` shows the old
    home's last one and the failover's steps so far, not a stale app."""
    from hybridsync.local import failover as local_failover

    held(tmp_path, {"home": "us-east-1"})
    status = {"at": 0, "mappings": {}, "functions": {}, "failure_queues": {}, "alarms": {}}
    (tmp_path / "status.json").write_text(json.dumps(status))
    seen = []

    def handing_over(app, to, model, *, say, **_):
        say("fenced us-east-1 (0.4 s)")
        main(["status", "--state-dir", str(tmp_path)])
        seen.append(capsys.readouterr().out)
        raise local_failover.Refused("stop here")

    monkeypatch.setattr(local_failover, "failover", handing_over)
    (tmp_path / failover.REQUEST).write_text(
        json.dumps({"to": "us-west-2", "live": True, "pid": os.getpid()})
    )
    failover.take(tmp_path, [object()], None, lambda _: None)
    (printed,) = seen
    assert "failing over to us-west-2: fenced us-east-1 (0.4 s)" in printed and "stale" not in printed
    (tmp_path / running.PID_FILE).unlink()  # `up` killed mid-way: stale after all
    main(["status", "--state-dir", str(tmp_path)])
    assert "stale" in capsys.readouterr().out
