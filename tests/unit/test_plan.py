from hybridsync import plan


def test_the_plan_grows_with_the_rate_and_prices_every_component():
    small, large = plan.plan(plan.Workload(1000)), plan.plan(plan.Workload(100_000))
    assert (small.shards, large.shards) == (1, 100)
    assert large.concurrency["write_back"] == 100 and large.pg_connections > small.pg_connections
    assert set(large.monthly_usd) >= {"dynamodb_writes", "gsi_writes", "aggregation_overhead", "lambda",
                                      "aurora_acu", "rds_proxy", "s3", "total"}  # fmt: skip
    assert large.monthly_usd["total"] > 50 * small.monthly_usd["total"]
    assert any("warm throughput" in n for n in large.notes) and not any("warm" in n for n in small.notes)
