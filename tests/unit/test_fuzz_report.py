"""What a failing fuzz run prints (bench/fuzz.py): each request it kept, a poisoned one with its dead
letter's reason, and any finding it counted without naming a request (issue 51, item 10: a run
with 13 accepted requests that poisoned the pipeline printed an empty `examples` list and nothing
else)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench_fuzz():
    spec = importlib.util.spec_from_file_location("bench_fuzz", ROOT / "bench" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures(**changes):
    clean = dict.fromkeys(("server_errors", "dropped", "schema_violations", "accepted_then_poisoned"), 0)
    return clean | {"examples": [], "poison_replayed": True, "dead_letters_new": 0, "drift": 0} | changes


def test_a_clean_run_prints_nothing():
    assert bench_fuzz().failures(figures()) == []


def test_each_poisoned_request_is_printed_with_its_dead_letters_reason():
    poisoned = (
        "accepted_then_poisoned: PUT /users/a%0D%0Ab/follows/c-1 -> dead letter (write_back): "
        "tagged Follow, but its keys {PK: 'USER#a\\r\\nb', ...} do not fit Follow's key templates"
    )
    lines = bench_fuzz().failures(figures(accepted_then_poisoned=1, dead_letters_new=1, examples=[poisoned]))
    assert lines == [f"FAILED {poisoned}"]


def test_a_finding_counted_but_named_by_no_request_is_said_not_hidden():
    lines = bench_fuzz().failures(figures(accepted_then_poisoned=13, dead_letters_new=12, drift=1))
    assert lines == ["FAILED accepted_then_poisoned: 13 counted, and no request named for them"]
