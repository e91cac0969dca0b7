"""The application-side write API (hybridsync.dynamodb.writes) on the embedded DynamoDB: what it writes is
what the pipeline takes, and a writer racing another never overwrites it blind."""

from __future__ import annotations

from decimal import Decimal

from hybridsync.dynamodb import store, writes
from hybridsync.sync import writeback
from shop.model import MODEL, ORDER


def values(workload, **changes):
    return {"OrderId": workload.id("o"), "CustomerId": f"{workload.prefix}-c", "Status": "OPEN",
            "CreatedAt": "2026-11-22T07:00:00.000Z", "Total": Decimal("10.00")} | changes  # fmt: skip


def test_what_it_writes_is_written_back_and_versions_grow_across_delete(
    stack, engine, workload, stream, truth
):
    client, table = stack.client(), stack.table_names["main"]
    first = writes.put(client, table, ORDER, values(workload))
    second = writes.put(client, table, ORDER, first | {"Status": "SHIPPED"})
    assert second["Version"] > first["Version"] and "Origin" not in store.get(client, table, ORDER.key(first))
    assert writes.delete(client, table, ORDER, second) and not writes.delete(client, table, ORDER, second)
    again = writes.put(client, table, ORDER, first)
    assert again["Version"] > second["Version"]  # a re-create passes the deleted item's version
    outcome = writeback.write_back(stream.read(), engine, MODEL, truth=truth)
    assert outcome.rejected == [] and outcome.changed >= 1
    with engine.connect() as conn:
        row = conn.exec_driver_sql("SELECT status, deleted, version FROM orders WHERE order_id = %s",
                                   (first["OrderId"],)).one()  # fmt: skip
    assert (row.status, row.deleted, row.version) == ("OPEN", False, again["Version"])


class Racing:
    """A client whose first read of an item is overtaken by another writer before its write."""

    def __init__(self, client, table, overtake):
        self._client, self.table, self.overtake, self.reads = client, table, overtake, 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def get_item(self, **request):
        answer = self._client.get_item(**request)
        self.reads += 1
        if self.reads == 1:
            self.overtake()
        return answer


def test_a_writer_overtaken_reads_the_version_again_and_writes_after_it(stack, workload):
    client, table = stack.client(), stack.table_names["main"]
    mine = writes.put(client, table, ORDER, values(workload))
    racing = Racing(client, table, lambda: writes.put(client, table, ORDER, mine | {"Status": "CANCELLED"}))
    written = writes.put(racing, table, ORDER, mine | {"Total": Decimal("12.00")})
    stored = store.get(client, table, ORDER.key(mine))
    assert racing.reads == 2 and stored["Version"] == written["Version"]  # it read again, then wrote


def test_it_writes_over_an_item_another_writer_stored_without_a_version(stack, workload):
    client, table = stack.client(), stack.table_names["main"]
    plain = ORDER.item(values(workload) | {"Version": 1})
    plain.pop("Version"), plain.pop("Entity")  # as an existing service wrote it
    client.put_item(TableName=table, Item=store.marshal(plain))
    fields = {k: plain[k] for k in values(workload)}
    written = writes.put(client, table, ORDER, fields | {"Status": "SHIPPED"})
    assert store.get(client, table, ORDER.key(written))["Version"] == written["Version"]
    assert writes.delete(client, table, ORDER, written)
