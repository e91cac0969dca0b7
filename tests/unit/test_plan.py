from hybridsync.sizing import plan


def test_the_plan_grows_with_the_rate_and_prices_every_component():
    small, large = plan.plan(plan.Workload(1000)), plan.plan(plan.Workload(100_000))
    assert (small.shards, large.shards) == (1, 100)
    assert large.concurrency["write_back"] == 100 and large.pg_connections > small.pg_connections
    assert set(large.monthly_usd) >= {"dynamodb_writes", "gsi_writes", "aggregation_overhead", "lambda",
                                      "aurora_acu", "rds_proxy", "s3", "total"}  # fmt: skip
    assert large.monthly_usd["total"] > 50 * small.monthly_usd["total"]
    assert any("warm throughput" in n for n in large.notes) and not any("warm" in n for n in small.notes)


def test_settling_write_back_records_costs_one_strongly_consistent_read_each():
    every = plan.plan(plan.Workload(1000, item_kb=5, settled_share=1.0)).monthly_usd["write_back_settling"]
    month = plan.SECONDS_PER_MONTH * plan.PRICES["dynamodb_read_request_unit"]
    assert every == round(1000 * 2 * month, 2)  # 5 KB: two 4 KB read units
    assert plan.plan(plan.Workload(1000, settled_share=0.0)).monthly_usd["write_back_settling"] == 0
