"""bench/chaos.py in its smoke mode, stretched to 20 seconds so CI sees every fault: seeded
changes on both sides through `hybridsync up` (a process of its own) under every fault, two
SIGKILLs and three PostgreSQL outages, then the failed batches redriven and both sides checked row
by row. (It is also the chaos benchmark's smoke test: the script, its flags and its JSON.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridsync import local
from tests.integration.test_benchmarks import smoke


@pytest.fixture(scope="module")
def emulators_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chaos-emulators")


@pytest.fixture(scope="module")
def emulators(emulators_folder: Path) -> Iterator[dict[str, str]]:
    """One DynamoDB Local and moto server, apart from the runs' apps, for both runs (each its own
    tables and its own PostgreSQL, which it stops): one emulators' start instead of two."""
    endpoints, stop = local.start_apart(emulators_folder)
    yield endpoints
    stop()


def request_errors(emulators_folder: Path) -> str:
    """What moto server logged of a request it failed (an answer AWS would not give: a 500 and its
    traceback; its Kinesis shards once raced the pump's writes, issue 51)."""
    return (emulators_folder / "moto.log").read_text()  # there from the start: a missing one fails


def test_nothing_lost_duplicated_or_stale_under_chaos(cloud_assembly, emulators, emulators_folder):
    figures = smoke("chaos", cloud_assembly, "--seconds", "20", "--outage", "3", services=emulators)
    print({k: v for k, v in figures.items() if k != "changes_by_kind"})  # shown with -s
    assert figures["caught_up"]
    assert (figures["lost"], figures["duplicated"], figures["stale"], figures["drift"]) == (0, 0, 0, 0)
    assert figures["aggregates_equal_recount"] and figures["aggregates"] > 0
    assert figures["index_keys_out_of_date"] == 0  # every writer wrote the keys the model derives
    assert figures["dead_letters"] == figures["dead_letters_expected"]
    assert figures["failed_batches_left"] == 0
    assert figures["bad_requests_answered_wrong"] == []
    assert figures["faults"]["sigkill"] == 2 and figures["faults"]["postgresql_stopped"] == 3
    assert figures["probes_never_arrived"] == 0
    assert figures["changes"] > 300
    assert "Traceback" not in request_errors(emulators_folder), request_errors(emulators_folder)[-3000:]


def test_nothing_lost_duplicated_or_stale_under_chaos_on_kinesis(
    kinesis_assembly, emulators, emulators_folder
):
    """The same on the app synthesized with `-c change_source=kinesis`: every change also put into
    Kinesis twice or out of order (`duplicate_put`, `reorder`), the pump SIGKILLed with the app;
    moto server fails no request meanwhile."""
    figures = smoke("chaos", kinesis_assembly, "--seconds", "10", "--outage", "2", services=emulators)
    print({k: v for k, v in figures.items() if k != "changes_by_kind"})
    assert figures["caught_up"]
    assert (figures["lost"], figures["duplicated"], figures["stale"], figures["drift"]) == (0, 0, 0, 0)
    assert figures["aggregates_equal_recount"] and figures["aggregates"] > 0
    assert figures["failed_batches_left"] == 0
    assert figures["faults"]["duplicate_put"] > 0 and figures["faults"]["reorder"] > 0
    assert figures["faults"]["sigkill"] == 2
    # the pump's PutRecords and the pollers' GetRecords on one shard: every answer one AWS would give
    assert "Traceback" not in request_errors(emulators_folder), request_errors(emulators_folder)[-3000:]
