"""The fuzz tier (`pytest -m fuzz`): bench/fuzz.py in its smoke mode, stretched to 800 requests,
against the shop's API on `hybridsync up`: no 5xx, no dropped connection, every answer as the
OpenAPI document says, and nothing accepted poisons the pipeline. (It is also the fuzz
benchmark's smoke test: the script, its flags and its JSON.)"""

from __future__ import annotations

from tests.integration.test_benchmarks import smoke


def test_hostile_requests_over_every_route_find_no_server_error_and_poison_nothing(cloud_assembly):
    figures = smoke("fuzz", cloud_assembly, "--requests", "800")
    print({k: v for k, v in figures.items() if k != "examples"})  # shown with -s
    assert figures["requests"] == 800 and figures["routes"] >= 35
    findings = {
        k: figures[k] for k in ("server_errors", "dropped", "schema_violations", "accepted_then_poisoned")
    }
    assert findings == dict.fromkeys(findings, 0), figures["examples"]
    assert figures["accepted"] > 0  # not only refusals: valid requests were drawn too
    assert figures["poison_replayed"]  # a 1e37 line is a dead letter and the next order is counted
