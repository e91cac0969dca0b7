import json

import pytest

from hybridsync.sizing import plan


def test_the_plan_grows_with_the_rate_and_prices_every_component():
    small, large = plan.plan(plan.Workload(1000)), plan.plan(plan.Workload(100_000))
    assert (small.shards, large.shards) == (1, 100)
    assert large.concurrency["write_back"] == 100 and large.pg_connections > small.pg_connections
    assert set(large.monthly_usd) >= {"dynamodb_writes", "gsi_writes", "aggregation_writes", "lambda",
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
    assert any(line.startswith("DynamoDB Streams is $") for line in out.splitlines())
    cli.main(["plan", "--writes-per-s", "1000", "--change-source", "kinesis", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert list(data["change_sources"]) == ["kinesis"]
    kinesis = data["change_sources"]["kinesis"]
    assert kinesis["label"] == "on-demand" and kinesis["monthly_usd"]["stream hours"] == 29.2


# Freshness, priced by hand: a 730-hour month at us-east-1's prices (x86_64 Lambda, as deployed).
MONTH = 730 * 3600
GB_S, REQUEST, WRITE_UNIT, LOGS_GB = 0.0000166667, 0.20 / 1e6, 0.625 / 1e6, 0.50


def test_the_aggregation_writes_its_freshness_share_of_a_naive_per_record_add():
    naive = 1000 * 0.6 * 3 * (1 + 2)  # order lines/s x 3 aggregates x (the item + its Rankings entry)
    for freshness, ratio in (("realtime", 0.624), ("economy", 0.165)):
        priced = plan.plan(plan.Workload(1000), freshness=freshness).monthly_usd["aggregation_writes"]
        assert priced == round(naive * ratio * MONTH * WRITE_UNIT, 2)
    measured = {"realtime": 0.5, "economy": 0.1}  # a benchmark's figures, given as an input
    assert plan.plan(plan.Workload(1000), ratios=measured).monthly_usd["aggregation_writes"] == round(
        naive * 0.5 * MONTH * WRITE_UNIT, 2
    )
    assert plan.plan(plan.Workload(1000), freshness="economy").freshness == "economy"


def test_idle_realtime_costs_the_drain_running_all_month():
    costs = plan.freshness_costs(plan.Workload(1000))
    realtime, economy = costs["realtime"], costs["economy"]
    always_on = MONTH * 0.25 * GB_S  # one 256 MB SqlSync invocation at all times
    assert realtime.items["Lambda duration: the drain"] == round(always_on, 2) == 10.95
    runs = MONTH / 60  # the schedule's runs: one a minute under both settings
    assert realtime.items["Lambda requests: the drain"] == economy.items["Lambda requests: the drain"]
    assert economy.items["Lambda duration: the drain"] == round(runs * 1.0 * 0.25 * GB_S, 2)  # ~1 s a run
    one_line_a_second = MONTH * 271 / 1024**3 * LOGS_GB  # its EMF line
    idle = realtime.idle - economy.idle
    assert abs(idle - (always_on - runs * 0.25 * GB_S + one_line_a_second)) < 0.02
    # no traffic: nothing but the drain, whose always-on duration is almost all of the difference:
    # the budget, "idle cost up by at most about $10 a month"
    assert realtime.idle == plan.freshness_cost(plan.Workload(0), "realtime").total
    assert idle > 0.95 * always_on and idle < 11.5
    # the lever: the drain's memory (its duration is priced per GB-second)
    half = plan.freshness_cost(plan.Workload(0), "realtime", drain_memory_gb=0.125).idle
    assert abs(half - (realtime.idle - always_on / 2)) < 0.01


def test_economy_invokes_less_at_load():
    costs = plan.freshness_costs(plan.Workload(1000))  # one DynamoDB stream shard
    realtime, economy = costs["realtime"], costs["economy"]
    # realtime: the aggregation is invoked at each of the 4 reads a second; the write-back's 1,000
    # records/s at ~2 ms each leave no time for more than full batches, one a second (as economy)
    assert realtime.items["Lambda requests: the stream consumers"] == round((1 + 4) * MONTH * REQUEST, 2)
    # economy: the write-back's 1,000-record batch fills each second; the aggregation's 30 s window
    # closes before its 5,000 records (600 lines/s: a batch every 8.3 s)
    assert economy.items["Lambda requests: the stream consumers"] == round(
        (1 + 600 / 5000) * MONTH * REQUEST, 2
    )
    for item in ("Lambda requests: the stream consumers", "Lambda duration: the stream consumers",
                 "logs: the stream consumers", "DynamoDB: the aggregation's write units"):  # fmt: skip
        assert economy.items[item] < realtime.items[item], item
    assert economy.total < realtime.total
    assert plan.freshness_difference(costs).startswith(
        f"realtime minus economy: ${realtime.total - economy.total:,.2f}/month"
    )
    # Kinesis on demand: 4 shards, an enhanced fan-out consumer pushed records up to 5 times a second
    kinesis = plan.freshness_costs(plan.Workload(1000), "realtime", "kinesis")["realtime"]
    assert kinesis.shards == 4
    assert kinesis.items["Lambda requests: the stream consumers"] == round(4 * 2 * 5 * MONTH * REQUEST, 2)
    with pytest.raises(ValueError):
        plan.freshness_costs(plan.Workload(1000), "eventually")


def test_the_plan_command_prints_the_freshness_asked(capsys):
    from hybridsync import cli

    cli.main(["plan", "--writes-per-s", "1000"])
    out = capsys.readouterr().out
    assert "realtime (no windows)" in out and "economy (5 s, 30 s windows)" in out
    assert "realtime - economy" in out and "idle: no traffic at all (the drain alone)" in out
    assert out.rstrip().splitlines()[-1].startswith("realtime minus economy: $")
    cli.main(["plan", "--writes-per-s", "1000", "--freshness", "realtime"])
    out = capsys.readouterr().out
    assert "realtime (no windows)" in out and "idle: no traffic at all" in out
    assert "economy" not in out and "realtime minus economy" not in out
    cli.main(["plan", "--writes-per-s", "1000", "--freshness", "economy", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert list(data["freshness_costs"]) == ["economy"] and data["freshness"] == "economy"
    assert data["freshness_costs"]["economy"]["idle_usd"] < 1


def test_the_plan_prices_the_settings_the_stacks_deploy():
    """sizing sits below the CDK app, so the plan repeats the settings it prices: they must agree."""
    from hybridsync.truth import context

    assert plan.FRESHNESS == context.FRESHNESS
    for name, prefix in (("write_back", "stream"), ("aggregate", "aggregate")):
        assert plan.CONSUMERS[name].window_s == context.BY_FRESHNESS[f"{prefix}_batching_window_s"]
        assert plan.CONSUMERS[name].batch == context.SETTINGS[f"{prefix}_batch_size"].default
    minutes = context.SETTINGS["outbox_drain_minutes"].default
    assert minutes * 60 == plan.DRAIN_PERIOD_S
    from hybridsync.cdk.schedules import DRAIN_MEMORY_MB

    assert plan.DRAIN_MEMORY_GB == DRAIN_MEMORY_MB / 1024


def test_replicas_pay_every_write_again_their_indexes_and_the_transfer():
    """Global tables billing: one replicated write unit per replica for each write, priced as a
    write unit; the replicas' GSIs in plain write units; each item sent to each other Region."""
    from hybridsync.sizing import replicas

    work = plan.Workload(1000, item_kb=2)
    result = plan.plan(work)
    one, two = replicas.replicas_cost(work, result, 1), replicas.replicas_cost(work, result, 2)
    home = result.monthly_usd
    assert one["replicated writes"] == pytest.approx(
        home["dynamodb_writes"] + home["aggregation_writes"], abs=0.02
    )
    assert one["replicas' GSI writes"] == pytest.approx(home["gsi_writes"], abs=0.01)
    sent_gb = (1000 * 2 + plan.aggregation_write_units(work)) * MONTH / 1e6
    assert one["cross-Region transfer"] == pytest.approx(sent_gb * 0.02, abs=0.01)
    assert two["total"] == pytest.approx(2 * one["total"], abs=0.02)
    assert replicas.replicas_cost(work, result, 0)["total"] == 0
    with pytest.raises(ValueError, match="0 or more"):
        replicas.replicas_cost(work, result, -1)


def test_the_plan_command_adds_the_replicas_rows(capsys):
    from hybridsync import cli

    cli.main(["plan", "--writes-per-s", "100", "--replicas", "2", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert set(data["replicas_usd"]) == {
        "replicated writes",
        "replicas' GSI writes",
        "cross-Region transfer",
        "total",
    }
    cli.main(["plan", "--writes-per-s", "100"])
    assert "replica Region" not in capsys.readouterr().out
    with pytest.raises(SystemExit, match="give --replicas N too"):
        cli.main(["plan", "--writes-per-s", "100", "--transfer-usd-per-gb", "0.05"])
