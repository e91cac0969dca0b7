"""`wait_caught_up`: a mapping is caught up only on a read made after the wait began."""

import time

from hybridsync import workloads


def test_a_lag_of_zero_from_before_the_wait_is_not_caught_up(monkeypatch):
    monkeypatch.setattr(workloads, "outbox_rows", lambda engine: 0)
    stale = {"m": {"lag_records": 0, "blocked": "", "read_through": time.time() - 1}}
    assert not workloads.wait_caught_up(lambda: stale, None, timeout_s=0.3, pause_s=0.05, calm=1)


def test_a_read_after_the_wait_began_with_nothing_left_is_caught_up(monkeypatch):
    monkeypatch.setattr(workloads, "outbox_rows", lambda engine: 0)

    def fresh():
        return {"m": {"lag_records": 0, "blocked": "", "read_through": time.time()}}

    assert workloads.wait_caught_up(fresh, None, timeout_s=2, pause_s=0.05, calm=2)


def test_lag_a_blocked_shard_or_an_unreachable_outbox_keep_it_waiting(monkeypatch):
    def status(**m):
        return lambda: {"m": {"lag_records": 0, "blocked": "", "read_through": time.time()} | m}

    monkeypatch.setattr(workloads, "outbox_rows", lambda engine: 0)
    assert not workloads.wait_caught_up(status(lag_records=3), None, timeout_s=0.2, pause_s=0.05, calm=1)
    assert not workloads.wait_caught_up(status(blocked="final"), None, timeout_s=0.2, pause_s=0.05, calm=1)
    monkeypatch.setattr(workloads, "outbox_rows", lambda engine: None)
    assert not workloads.wait_caught_up(status(), None, timeout_s=0.2, pause_s=0.05, calm=1)


def test_an_app_whose_drain_does_not_run_may_leave_the_outbox_out(monkeypatch):
    """On a database other apps share (the suite's), rows they left in the outbox are not its own."""
    monkeypatch.setattr(workloads, "outbox_rows", lambda engine: 5)
    fresh = lambda: {"m": {"lag_records": 0, "blocked": "", "read_through": time.time()}}  # noqa: E731
    assert not workloads.wait_caught_up(fresh, None, timeout_s=0.2, pause_s=0.05, calm=1)
    assert workloads.wait_caught_up(fresh, None, timeout_s=2, pause_s=0.05, calm=2, outbox=False)
