"""Every benchmark in its smoke mode (`--smoke`: seconds, tiny sizes, the same code path): it runs
to the end and prints, as its last line, the JSON object whose keys the README documents. A
benchmark that breaks fails here, not in the hands of the next person who runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCALE_KEYS = {
    "shards", "changes", "lost", "duplicated", "stale", "drift", "conflicts_injected", "conflicts_retried",
    "batches_failed_by_conflict", "rollovers", "rollovers_per_shard_count", "cursor_items_end",
    "pg_connections_peak", "pg_connection_cap", "pinning_statements", "lag_p99_s",
}  # fmt: skip
FRESHNESS_KEYS = {
    f"{source}_{freshness}_{direction}_{q}_s" for source in ("dynamodb", "kinesis")
    for freshness in ("realtime", "economy") for direction in ("row", "aggregate", "item")
    for q in ("p50", "p99")
} | {
    "aggregate_realtime_units_ratio", "aggregate_economy_units_ratio", "aggregate_conflicts_retried",
    "aggregate_exact", "aggregate_floor_1s_ratio", "aggregate_floor_5s_ratio",
    "writeback_realtime_vs_copy_ratio", "writeback_full_batch_vs_copy_ratio",
    "invocations_per_change_realtime", "invocations_per_change_economy", "realtime_goals_met",
}  # fmt: skip
KEYS = {  # the figures each benchmark must print (it may print more)
    "adopt": {"rows_pg_to_ddb", "rows_ddb_to_pg", "pg_to_ddb_vs_batch_write_ratio", "ddb_to_pg_vs_copy_ratio",
              "lost", "stale", "extra", "drift", "aggregates_equal_recount", "resumed",
              "rows_redone_after_resume", "redo_bound", "peak_rss_mb", "rss_ratio_2x_size"},
    "access_patterns": {"items", "distinct_index_vs_scan_ru_ratio", "skip_scan_vs_scan_ru_ratio",
                        "time_range_vs_scan_ru_ratio", "per_day_vs_sharded_requests_ratio",
                        "open_range_vs_scan_ru_ratio", "seed_distinct_keys", "capacity_model_mismatches",
                        "status_range_vs_scan_ru_ratio", "random_vs_calculated_one_item_requests_ratio",
                        "range_header_only_lines_read"},
    "aggregate": {"records", "write_units", "naive_write_units", "write_units_ratio", "dynamodb_calls",
                  "exact"},
    "chaos": {"seed", "replay", "changes", "lost", "duplicated", "stale", "drift", "findings", "faults",
              "fault_kinds", "lag_p99_s", "aggregates_equal_recount", "failed_batches_left",
              "rate_first_minute", "rate_last_minute"},
    "console": {"unwatched_orders_per_s", "watched_orders_per_s", "watched_vs_unwatched_ratio", "items",
                "tick_ms", "recount_s", "trace_s", "log_mb"},
    "cold_start": {"aggregate_ratio", "api_ratio", "write_back_ratio", "max_ratio",
                   "container_fork_vs_fresh_cpu_ratio"},
    "freshness": FRESHNESS_KEYS,
    "fuzz": {"requests", "server_errors", "dropped", "schema_violations", "accepted_then_poisoned", "routes",
             "accepted", "poison_replayed", "seed"},
    "mixed_writers": {"mixes", "engine_changes_per_s", "plain_changes_per_s", "mixed_changes_per_s",
                      "plain_vs_engine_ratio", "mixed_vs_engine_ratio", "drift", "aggregates_equal_recount",
                      "index_keys_out_of_date", "dead_letters", "write_back_items_read",
                      "engine_api_fallbacks"},
    "local_pipeline": {"raw_orders_per_s", "pipeline_orders_per_s", "pipeline_vs_raw_ratio", "drift",
                       "lag_p99_s", "rss_mb_start", "rss_mb_end", "kinesis_vs_dynamodb_ratio",
                       "kinesis_lag_p99_s", "dynamodb_lag_p99_s"},
    "operate": {"alarm_period_s", "all_alarmed_and_cleared", "detect_s", "clear_s", "detect_over_period_max",
                "records", "s3_records_per_s", "stream_records_per_s", "s3_vs_stream_fetch_ratio"},
    "posture": {"tls_connect_ms", "socket_connect_ms", "connect_ratio", "roundtrip_ratio", "rows_ratio",
                "iam_token_ms"},
    "regions": {"home_row_p50_s", "home_row_p99_s", "replica_row_p50_s", "replica_row_p99_s",
                "replica_vs_home_row_p50_ratio", "unseen", "replication_p50_ms", "replication_max_ms",
                "racing_writes", "settled", "replicas_equal", "racing_drift", "aggregates_equal_recount",
                "won_back", "handover_fenced_s", "handover_settled_s", "handover_started_s",
                "handover_rebuilt_s", "handover_total_s", "handover_rows", "handover_unseen",
                "handover_row_p50_s", "handover_row_max_s", "handover_rebuild_written",
                "handover_row_max_vs_home_row_p50_ratio"},
    "read_path": {"hit_dynamodb_calls", "hit_sql_calls", "miss_dynamodb_calls", "hit_vs_sql_p50_ratio",
                  "outbox_vs_raw_ratio"},
    "write_back": {"records", "records_per_s", "vs_copy_ratio", "vs_naive_ratio", "plain_vs_copy_ratio",
                   "plain_vs_engine_copy_ratio", "replay_records_per_s", "settle_records_per_s",
                   "settle_items_read_per_record", "settle_read_units_per_record", "verify_records_per_s"},
    "scale": SCALE_KEYS,
    "writes": {"vertical_partition_wu_ratio", "large_item_roundtrip_bytes", "gzip_ratio",
               "place_order_vs_put_ratio", "history_ok", "review_put_wu", "review_put_wu_before",
               "static_conflicts_one_customer", "static_conflicts_two_customers"},
}  # fmt: skip
NEEDS_ASSEMBLY = {
    "chaos",
    "console",
    "freshness",
    "fuzz",
    "local_pipeline",
    "mixed_writers",
    "operate",
    "regions",
    "scale",
}


def test_every_benchmark_is_covered():
    assert {p.stem for p in (ROOT / "bench").glob("*.py")} == set(KEYS)


def smoke(name: str, assembly: Path, *extra: str, services: dict[str, str] | None = None) -> dict:
    """Run `bench/<name>.py --smoke` (plus `extra` flags) on its own services, or on the emulators
    `services` names (the chaos runs share theirs: tests/reliability/test_chaos.py); its JSON figures."""
    command = [sys.executable, str(ROOT / "bench" / f"{name}.py"), "--smoke", *extra]
    if name in NEEDS_ASSEMBLY:
        command += ["--assembly", str(assembly)]
    env = {k: v for k, v in os.environ.items() if k not in ("DYNAMODB_ENDPOINT", "DATABASE_URL")}  # its own
    env |= services or {}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name} --smoke failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert KEYS[name] <= set(figures), f"missing: {sorted(KEYS[name] - set(figures))}"
    return figures


# chaos and fuzz: tests/reliability/test_chaos.py and tests/fuzz run their smoke modes, longer, and
# check what they find
@pytest.mark.parametrize("name", sorted(set(KEYS) - {"chaos", "fuzz"}))
def test_benchmark_smoke_run_prints_its_figures(name, cloud_assembly, request):
    extra: tuple[str, ...] = ()
    if name in ("local_pipeline", "freshness"):  # on both change sources, side by side
        extra = ("--kinesis-assembly", str(request.getfixturevalue("kinesis_assembly")))
    figures = smoke(name, cloud_assembly, *extra)
    if name == "local_pipeline":  # either source: every change in PostgreSQL
        assert (figures["dynamodb_drift"], figures["kinesis_drift"]) == (0, 0), figures
    if name == "freshness":  # on either source every write reached the other side, the aggregates exact
        assert (figures["dynamodb_realtime_unseen"], figures["kinesis_realtime_unseen"]) == (0, 0), figures
        assert figures["aggregate_exact"], figures
        # a floor is a share of the naive ADD: above 0, and no fold beats folding every window's changes
        assert 0 < figures["aggregate_floor_5s_ratio"] <= figures["aggregate_floor_1s_ratio"] <= 1, figures
    if (
        name == "regions"
    ):  # racing in two Regions, and a failover, leave every replica, row and aggregate right
        assert figures["unseen"] == figures["handover_unseen"] == 0 and figures["handover_rows"] > 0, figures
        assert figures["settled"] and figures["replicas_equal"], figures
        assert figures["racing_drift"] == 0 and figures["aggregates_equal_recount"], figures
    if name == "adopt":  # correctness holds at any size: nothing lost, resumed, the rebuild exact
        assert (figures["drift"], figures["undone"], figures["resumed"]) == (0, 0, True), figures
        assert (
            figures["aggregates_equal_recount"]
            and figures["rows_redone_after_resume"] <= figures["redo_bound"]
        )
    if name == "mixed_writers":  # keys written by both kinds of writer: still no drift, exact aggregates
        assert (figures["drift"], figures["index_keys_out_of_date"], figures["dead_letters"]) == (0, 0, 0)
        assert figures["aggregates_equal_recount"] and figures["engine_api_fallbacks"] == 0, figures
        assert all(figures[k] for k in ("items_untagged", "items_without_version", "items_counter_version"))
    if name == "write_back":  # a replay reads nothing; settling reads each item once, consistently
        assert (figures["replay_items_read_per_record"], figures["settle_items_read_per_record"]) == (0, 1)
        assert figures["settle_read_units_per_record"] == figures["verify_read_units_per_record"] == 1
