from decimal import Decimal

import pytest

from hybridsync.model import keys
from hybridsync.model.declare import Side, Template
from shop.model import MAIN, MODEL, ORDER, ORDER_LINE, PLAYER_SCORE, SALES
from tests.samples import SAMPLES


def values(entity_name, n=0):
    entity = MODEL.entity(entity_name)
    sample = dict(SAMPLES[entity_name][n])
    return sample | ({"Version": 1} if entity.versioned else {})


def test_every_entity_has_a_sample():
    assert {e.name for e in MODEL.all_entities} == set(SAMPLES)


def test_open_order_carries_the_sparse_and_sharded_keys():
    item = ORDER.item(values("Order", 0))
    assert item["PK"] == "CUSTOMER#c-1"
    assert item["SK"] == "ORDER#2026-11-22T07:00:00.000Z#o-1"
    assert item["TimeShard"] == keys.sharded("ORDERS", "o-1", 8)
    assert item["OpenShard"] == keys.sharded("OPEN", "o-1", 4)
    assert item["OrderOpenDate"] == item["CreatedAt"]
    assert item["Entity"] == "Order"


def test_shipped_order_leaves_the_open_orders_index():
    item = ORDER.item(values("Order", 1))
    assert "OpenShard" not in item and "OrderOpenDate" not in item
    assert "TimeShard" in item


def test_order_line_sorts_after_its_order_and_pads_the_line_number():
    line = ORDER_LINE.item(values("OrderLine") | {"LineNo": Decimal("3")})
    order = ORDER.item(values("Order", 0))
    assert line["SK"] == order["SK"] + "#LINE#0003"
    assert line["SK"].startswith(order["SK"])


def test_string_ids_that_look_numeric_keep_their_digits():
    assert Template("CUSTOMER#{CustomerId}")({"CustomerId": "007"}) == "CUSTOMER#007"


def test_leaderboard_key_is_computable_for_one_player():
    item = PLAYER_SCORE.item(values("PlayerScore"))
    assert item["RankPK"] == keys.sharded("LEADERBOARD", "c-1", 8)
    assert item["RankSK"] == 1200


def test_aggregate_rank_partition_is_sharded_per_period():
    item = SALES.item(values("Sales"))
    assert item["RankPK"].startswith("SALES#2026-11-22#")


def test_missing_required_or_unknown_attributes_are_named():
    with pytest.raises(ValueError, match="missing required attribute 'Total'"):
        ORDER.item({k: v for k, v in values("Order").items() if k != "Total"})
    with pytest.raises(ValueError, match=r"unknown attribute\(s\) \['Colour'\]"):
        ORDER.item(values("Order") | {"Colour": "red"})


def test_masters_and_sql_mappings():
    assert {e.name for e in MODEL.mastered_in(Side.DYNAMODB) if e.sql_table} == {
        "Order",
        "OrderLine",
        "PlayerScore",
        "Follow",
    }
    assert {e.sql_table for e in MODEL.mastered_in(Side.POSTGRESQL)} == {
        "customers",
        "products",
        "product_availability",
    }
    assert all(e.sql_key for e in MODEL.synced())


def test_every_index_key_is_built_by_some_entity():
    built = {name for e in MODEL.all_entities for name in e.keys}
    for index in MAIN.indexes:
        assert index.partition.name in built, index.name
        assert index.sort is None or index.sort.name in built or index.sort.name == "CreatedAt"


def test_create_table_request_renders_the_declaration():
    request = MAIN.create_request("t")
    assert request["KeySchema"] == [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ]
    assert {g["IndexName"] for g in request["GlobalSecondaryIndexes"]} == {i.name for i in MAIN.indexes}
    assert {"AttributeName": "RankSK", "AttributeType": "N"} in request["AttributeDefinitions"]
    assert request["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"


def test_readers_get_key_prefixes_from_the_model():
    assert ORDER.key_prefix("SK") == "ORDER#"
    assert ORDER_LINE.key_prefix("SK", {"CreatedAt": "2026-11-22T07:00:00.000Z", "OrderId": "o-1"}) == (
        "ORDER#2026-11-22T07:00:00.000Z#o-1#LINE#"
    )
    journal = MODEL.entity("AggregationJournal")
    where = {"ShardId": "s-1", "JournalId": "42"}
    assert journal.key_prefix("SK", where) == "JOURNAL#42#"
    assert journal.key(where | {"Part": 3})["SK"].startswith(journal.key_prefix("SK", where))


def test_scatter_reads_get_every_shard_from_the_model():
    assert ORDER.partitions("TimeShard") == [f"ORDERS#{n}" for n in range(8)]
    assert ORDER.partitions("OpenShard") == [f"OPEN#{n}" for n in range(4)]  # sparse or not
    assert SALES.partitions("RankPK", {"Period": "2026-11"}) == [f"SALES#2026-11#{n}" for n in range(4)]
    assert PLAYER_SCORE.partitions("RankPK") == [f"LEADERBOARD#{n}" for n in range(8)]
    assert ORDER.key_value("TimeShard", values("Order")) in ORDER.partitions("TimeShard")
    assert (ORDER.shards("TimeShard"), ORDER.shards("OpenShard"), ORDER.shards("PK")) == (8, 4, 1)
    with pytest.raises(ValueError, match="cannot build"):
        SALES.partitions("RankPK")  # the period is part of the partition


def test_no_module_outside_the_model_spells_a_key():
    """The shop's key prefixes (`CUSTOMER#`, `ORDERS`, ...) are declared once, in its model: the
    engine, the shop's code and its workloads build keys from the declaration."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    declared = {p.split("#")[0].strip("{") for e in MODEL.entities for b in e.keys.values()
                for p in [getattr(b, "pattern", getattr(b, "prefix", ""))] if p}  # fmt: skip
    declared.discard("")
    spelled = re.compile(r"\b(" + "|".join(sorted(declared)) + r")#")
    offenders = []
    for path in [*root.glob("hybridsync/**/*.py"), *root.glob("examples/shop/**/*.py")]:
        if path.name in ("model.py", "scaffold.py") or {"migrations", "declare"} & set(path.parts):
            continue  # the declarations (the shop's, the engine's own), a new project's model
        if {"cdk.out", ".local"} & set(path.relative_to(root).parts):
            continue  # what a synth or a run wrote: copies of the sources (a thousand files)
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef) and n.body
                      and isinstance(n.body[0], ast.Expr)}  # fmt: skip
        for node in ast.walk(tree):
            literal = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if literal and id(node) not in docstrings and spelled.search(node.value):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    assert offenders == []


def test_a_measure_counts_the_sources_it_names():
    """Net total and net count over invoices and credit notes (sign -1), beside how many of each
    there were: a measure naming its sources takes only their records."""
    from hybridsync.model.declare import Aggregate, Count, Entity, Field, FieldType, Period, Source, Sum

    def document(name: str) -> Entity:
        fields = (Field("DocId", FieldType.STRING), Field("CustomerId", FieldType.STRING),
                  Field("At", FieldType.TIMESTAMP), Field("Amount", FieldType.DECIMAL))  # fmt: skip
        return Entity(name, MAIN, Side.DYNAMODB, fields=fields,
                      keys={"PK": Template(f"{name.upper()}#{{DocId}}"), "SK": Template("DOC")})  # fmt: skip

    invoice, credit = document("Invoice"), document("CreditNote")
    totals = Aggregate(
        "Billing", sources=(invoice, Source(credit, sign=-1)), group_by=("CustomerId",), time="At",
        periods=(Period.MONTH,), partition="CUSTOMER#{CustomerId}", sort="BILLING#{Period}",
        measures=(Sum("Net", of="Amount"), Count("NetCount"), Count("Invoices", sources=("Invoice",)),
                  Count("CreditNotes", sources=("CreditNote",), signed=False)),
    )  # fmt: skip
    values = {"DocId": "d", "CustomerId": "c", "At": "2026-11-22T07:00:00.000Z", "Amount": Decimal("10")}
    assert list(totals.contribution(invoice, values).values()) == [(10, 1, 1, 0)]
    assert list(totals.contribution(credit, values).values()) == [(-10, -1, 0, 1)]
    with pytest.raises(ValueError, match="Refunds"):
        Aggregate("Bad", sources=(invoice,), group_by=("CustomerId",), time="At", periods=(Period.MONTH,),
                  partition="X", sort="Y", measures=(Count("Refunds", sources=("Refund",)),))  # fmt: skip


def test_the_log_retention_setting_takes_cloudwatchs_durations_only():
    from types import SimpleNamespace

    from hybridsync.truth import context

    def scope(value):
        return SimpleNamespace(node=SimpleNamespace(try_get_context=lambda name: value))

    assert context.log_retention(scope(None)).name == "ONE_MONTH"
    assert context.log_retention(scope("365")).name == "ONE_YEAR"
    with pytest.raises(ValueError, match="log_retention_days=31: CloudWatch Logs keeps logs one of"):
        context.log_retention(scope("31"))
    assert (
        context.read(scope("1.5"), "aurora_min_acu") == 1.5
        and context.read(scope(None), "aurora_max_acu") == 4.0
    )
