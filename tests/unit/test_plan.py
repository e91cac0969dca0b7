import json

import pytest

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


# The change sources, priced by hand: 1,000 writes/s of 1 KB for a 730-hour month.
RECORDS = 1000 * 730 * 3600  # one change record per write
RECORD_KB = 2 * 1 + 0.25  # a Kinesis change record: old and new images and its own fields
GB = RECORDS * RECORD_KB / 1024**2
LAMBDA = (1000 * 0.001 + 600 * 0.00025) * 0.0000166667 * 730 * 3600 + 1000 / 100 * 2 * 0.2 / 1e6 * 730 * 3600


def test_dynamodb_streams_cost_nothing_but_the_invocations_kinesis_pays_too():
    cost = plan.dynamodb_streams_cost(plan.Workload(1000))
    assert cost.items == {"stream reads (free for Lambda triggers)": 0.0,
                          "Lambda: the stream consumers": round(LAMBDA, 2)}  # fmt: skip
    assert cost.total == round(LAMBDA, 2) == plan.plan(plan.Workload(1000)).monthly_usd["lambda"]
    assert not cost.notes
    assert "no room for 1 more reader" in plan.dynamodb_streams_cost(plan.Workload(1000), 1).notes[0]


def test_kinesis_on_demand_prices_each_change_the_stream_hours_and_each_fan_out_consumers_reads():
    cost = plan.kinesis_cost(plan.Workload(1000))
    assert cost.label == "on-demand"
    assert cost.items == {
        "DynamoDB change data capture units": round(RECORDS * 1 * 0.10 / 1e6, 2),  # 1 KB: one unit
        "stream hours": round(730 * 0.04, 2),
        "GB written": round(RECORDS * 3 / 1024**2 * 0.08, 2),  # 2.25 KB rounded up to 3 KB
        "enhanced fan-out: GB read by 2 consumers": round(2 * GB * 0.05, 2),
        "Lambda: the stream consumers": round(LAMBDA, 2),
    }
    assert cost.total == round(sum(cost.items.values()), 2)
    shared = plan.kinesis_cost(plan.Workload(1000), fan_out=False)
    assert shared.items["GB read by 2 consumers"] == round(2 * GB * 0.04, 2)
    assert "share each shard" in shared.notes[0]


def test_kinesis_provisioned_prices_shard_hours_and_put_payload_units_instead():
    cost = plan.kinesis_cost(plan.Workload(1000), shards=3)
    assert cost.label == "provisioned, 3 shards"
    assert cost.items == {
        "DynamoDB change data capture units": round(RECORDS * 0.10 / 1e6, 2),
        "shard hours": round(3 * 730 * 0.015, 2),
        "PUT payload units (25 KB)": round(RECORDS * 1 * 0.014 / 1e6, 2),  # 2.25 KB: one unit
        "enhanced fan-out: 2 consumers' shard hours": round(2 * 3 * 730 * 0.015, 2),
        "enhanced fan-out: GB read by 2 consumers": round(2 * GB * 0.013, 2),
        "Lambda: the stream consumers": round(LAMBDA, 2),
    }
    on_demand = plan.kinesis_cost(plan.Workload(1000))
    assert "stream hours" not in cost.items and "shard hours" not in on_demand.items
    assert not cost.notes  # 1,000 records/s of 2.25 KB: 3 shards are enough
    assert "need 3" in plan.kinesis_cost(plan.Workload(1000), shards=1).notes[0]


def test_each_fan_out_consumer_adds_its_shard_hours_and_its_reads():
    two = plan.kinesis_cost(plan.Workload(1000), shards=3)
    five = plan.kinesis_cost(plan.Workload(1000), shards=3, own_consumers=3)
    assert five.items["enhanced fan-out: 5 consumers' shard hours"] == round(5 * 3 * 730 * 0.015, 2)
    added = five.total - two.total
    assert abs(added - (3 * 3 * 730 * 0.015 + 3 * GB * 0.013)) < 0.05
    assert "at most 20" in plan.kinesis_cost(plan.Workload(1000), own_consumers=19).notes[0]


def test_retention_past_a_day_is_priced_as_aws_prices_it():
    day = plan.kinesis_cost(plan.Workload(1000), shards=3).items
    week = plan.kinesis_cost(plan.Workload(1000), shards=3, retention_h=168).items
    assert week["retention to 7 days (shard hours)"] == round(3 * 730 * 0.02, 2)
    assert "retention to 7 days (shard hours)" not in day
    month = plan.kinesis_cost(plan.Workload(1000), retention_h=720).items  # on-demand: GB-months
    assert month["retention to 7 days (GB-month)"] == round(GB / 730 * (168 - 24) * 0.10, 2)
    assert month["retention past 7 days (GB-month)"] == round(GB / 730 * (720 - 168) * 0.023, 2)
    for wrong in (12, 9000):
        with pytest.raises(ValueError, match="24 to 8,760 hours"):
            plan.kinesis_cost(plan.Workload(1000), retention_h=wrong)


def test_side_by_side_one_sentence_says_which_is_cheaper_and_why():
    both = plan.change_sources(plan.Workload(1000))
    assert list(both) == ["dynamodb", "kinesis"]
    sentence = plan.cheaper(both)
    difference = both["kinesis"].total - both["dynamodb"].total
    assert sentence.startswith(f"DynamoDB Streams is ${difference:,.2f}/month cheaper")
    assert "Lambda reads it for free" in sentence and "GB written" in sentence  # the largest line
    assert list(plan.change_sources(plan.Workload(1000), "kinesis")) == ["kinesis"]
    assert plan.cheaper(plan.change_sources(plan.Workload(1000), "dynamodb")) == ""
    with pytest.raises(ValueError):
        plan.change_sources(plan.Workload(1000), "firehose")


def test_the_plan_command_prints_each_source_side_by_side(capsys):
    from hybridsync import cli

    assert cli.main(["plan", "--writes-per-s", "1000", "--kinesis-shards", "3", "--own-consumers", "1"]) in (
        0,
        None,
    )
    out = capsys.readouterr().out
    assert (
        "DynamoDB Streams (Lambda triggers)" in out and "Kinesis Data Streams (provisioned, 3 shards)" in out
    )
    assert "enhanced fan-out: 3 consumers' shard hours" in out and "total" in out
    assert "no room for 1 more reader" in out
    assert out.rstrip().splitlines()[-1].startswith("DynamoDB Streams is $")
    cli.main(["plan", "--writes-per-s", "1000", "--change-source", "kinesis", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert list(data["change_sources"]) == ["kinesis"]
    kinesis = data["change_sources"]["kinesis"]
    assert kinesis["label"] == "on-demand" and kinesis["monthly_usd"]["stream hours"] == 29.2
