"""The local Kinesis (moto server's) under a pump and its pollers at once: a shard read while it is
written answers its records, never a 500 ("OrderedDict mutated during iteration")."""

from __future__ import annotations

import sys
import threading
import time

import moto.server
import pytest
from moto.kinesis.models import Shard

from hybridsync import local


class _Server:
    """moto server, not started: what start_services does before it serves is what is tested."""

    def __init__(self, **_: object):
        pass

    def start(self) -> None:
        pass

    def get_host_and_port(self) -> tuple[str, int]:
        return "127.0.0.1", 1

    def stop(self) -> None:
        pass


@pytest.fixture
def often():
    """Threads switch as often as they can: a race shows within milliseconds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_a_shard_read_while_the_pump_writes_it_never_fails(monkeypatch, often):
    monkeypatch.setattr(moto.server, "ThreadedMotoServer", _Server)
    local.start_services()  # the local app's moto server, as `hybridsync up` starts it
    shard = Shard(0, 0, 2**128 - 1)
    for _ in range(2000):
        shard.put_record("key", "ZGF0YQ==", None)
    errors: list[Exception] = []
    done = threading.Event()

    def put() -> None:  # the pump's PutRecords
        while not done.is_set():
            shard.put_record("key", "ZGF0YQ==", None)

    def get() -> None:  # a poller's GetRecords
        last = "0"
        while not done.is_set():
            try:
                records, _, _ = shard.get_records(last, 10_000)
            except RuntimeError as error:
                errors.append(error)
                done.set()
                return
            last = "0" if len(records) < 10 else str(records[-10].sequence_number)

    threads = [threading.Thread(target=put), threading.Thread(target=get), threading.Thread(target=get)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    done.set()
    for thread in threads:
        thread.join()
    assert errors == []
    assert shard.get_max_sequence_number() == len(shard.records)  # every put numbered, none lost
