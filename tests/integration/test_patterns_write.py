"""Adjacency lists, hierarchical keys, relational data in one table and version history, on the
embedded DynamoDB, with known answers."""

from __future__ import annotations

import threading
import uuid
from decimal import Decimal

import pytest

from hybridsync.dynamodb import distinct, store
from hybridsync.model.convert import unmarshal
from hybridsync.model.errors import Conflict, Invalid, NotFound
from shop import follows, orders, publications, stores
from shop.model import COLLECTION


@pytest.fixture
def table(stack):
    return stack.table_names["main"]


@pytest.fixture
def tag():
    return uuid.uuid4().hex[:8]


def all_pages(read, *args):
    found, cursor, pages = [], None, 0
    while True:
        page, cursor = read(*args, limit=2, cursor=cursor)
        found += page
        pages += 1
        if cursor is None:
            return found, pages


def test_follow_unfollow_and_both_directions_paged(dynamodb, table, tag):
    a, b, c, d = (f"{tag}-{n}" for n in "abcd")
    for followee in (b, c, d):
        assert follows.follow(dynamodb, table, a, followee)[1]
    assert follows.follow(dynamodb, table, a, b)[1] is False  # again: nothing changes
    follows.follow(dynamodb, table, c, b)
    follows.follow(dynamodb, table, d, b)
    assert all_pages(lambda *x, **k: follows.following(dynamodb, table, *x, **k), a) == ([b, c, d], 2)
    who, pages = all_pages(lambda *x, **k: follows.followers(dynamodb, table, *x, **k), b)
    assert sorted(who) == [a, c, d] and pages == 2
    assert distinct.members(dynamodb, table, COLLECTION, f"USER#{a}") == 3
    follows.unfollow(dynamodb, table, a, c)
    assert follows.following(dynamodb, table, a, limit=10)[0] == [b, d]
    with pytest.raises(NotFound):
        follows.unfollow(dynamodb, table, a, c)
    follows.unfollow(dynamodb, table, c, b)
    assert f"USER#{c}" not in distinct.distinct_keys(dynamodb, table, COLLECTION)  # c's last edge: gone
    with pytest.raises(Invalid, match="themselves"):
        follows.follow(dynamodb, table, a, a)
    with pytest.raises(Invalid, match="cursor"):
        follows.following(dynamodb, table, a, cursor="not-a-cursor")


def test_stores_are_found_at_every_level_of_the_hierarchy_unicode_included(dynamodb, table, tag):
    country = f"X{tag}"
    places = [("ZH", "Zürich", "s1"), ("ZH", "Zürich", "s2"), ("ZH", "Winterthur", "s3"),
              ("GE", "Genève", "s4"), ("東京都", "渋谷区", "s5"), ("ZH", "Züri", "s6")]  # fmt: skip
    for region, city, store_id in places:
        stores.put_store(dynamodb, table, {"Country": country, "Region": region, "City": city,
                                           "StoreId": store_id, "Name": f"Store {store_id}"})  # fmt: skip

    def ids(*levels):
        return sorted(s["StoreId"] for s in stores.stores(dynamodb, table, country, *levels))

    assert ids() == ["s1", "s2", "s3", "s4", "s5", "s6"]
    assert ids("ZH") == ["s1", "s2", "s3", "s6"]
    assert ids("ZH", "Zürich") == ["s1", "s2"]  # not Züri: a level never matches a longer sibling
    assert ids("東京都", "渋谷区") == ["s5"]
    assert ids("VD") == []
    with pytest.raises(Invalid, match="City"):
        stores.put_store(dynamodb, table, {"Country": country, "Region": "ZH", "City": "A#B",
                                           "StoreId": "s9", "Name": "x"})  # fmt: skip
    with pytest.raises(Invalid, match="region"):
        stores.stores(dynamodb, table, country, None, "Zürich")


def test_a_publication_its_titles_and_tags_from_one_table(dynamodb, table, tag):
    pub = f"pub-{tag}"
    publications.edit(dynamodb, table, pub, {"Name": "Better Programming"}, editor="e1")
    publications.add_title(dynamodb, table, pub, "t1", "Keys first", tags=("dynamodb", "design"))
    publications.add_title(dynamodb, table, pub, "t2", "Streams", tags=("dynamodb",))
    publications.add_title(dynamodb, table, pub, "t3", "Joins", tags=("sql",))
    assert publications.latest(dynamodb, table, pub)["Name"] == "Better Programming"
    assert [t["Name"] for t in publications.titles(dynamodb, table, pub)] == [
        "Keys first",
        "Streams",
        "Joins",
    ]
    assert [t["TitleId"] for t in publications.titles(dynamodb, table, pub, tag="dynamodb")] == ["t1", "t2"]
    assert publications.tags(dynamodb, table, pub, "t1") == ["design", "dynamodb"]
    with pytest.raises(Conflict):
        publications.add_title(dynamodb, table, pub, "t1", "Again")
    with pytest.raises(NotFound):
        publications.add_title(dynamodb, table, f"{pub}-none", "t1", "Orphan")


def test_version_history_keeps_every_revision_and_the_latest_in_v0(dynamodb, table, tag):
    pub = f"pub-{tag}"
    for n in range(1, 6):
        publications.edit(dynamodb, table, pub, {"Name": f"Name {n}", "Description": f"d{n}"}, editor="e")
    latest = publications.latest(dynamodb, table, pub)
    assert (latest["Revision"], latest["Name"]) == (5, "Name 5")
    revisions, pages = all_pages(lambda *x, **k: publications.history(dynamodb, table, *x, **k), pub)
    assert [r["Revision"] for r in revisions] == [5, 4, 3, 2, 1] and pages == 3
    for n in range(1, 6):
        assert publications.revision(dynamodb, table, pub, n)["Name"] == f"Name {n}"
    assert revisions[0] == latest | {"Slot": 5}
    with pytest.raises(NotFound):
        publications.revision(dynamodb, table, pub, 6)


class MeetBeforeWriting:
    """A client whose transactions wait until every editor has read: both edit the same revision."""

    def __init__(self, client, editors):
        self._client, self._barrier = client, threading.Barrier(editors)

    def transact_write_items(self, **request):
        self._barrier.wait(timeout=10)
        return self._client.transact_write_items(**request)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_concurrent_edits_of_one_revision_one_wins_one_conflicts(dynamodb, table, tag):
    pub = f"pub-{tag}"
    publications.edit(dynamodb, table, pub, {"Name": "v1"}, editor="e")
    racing = MeetBeforeWriting(dynamodb, 2)
    outcomes = {}

    def edit(name):
        try:
            publications.edit(racing, table, pub, {"Name": name}, editor=name)
            outcomes[name] = "won"
        except Conflict:
            outcomes[name] = "conflict"

    threads = [threading.Thread(target=edit, args=(n,)) for n in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes.values()) == ["conflict", "won"]
    winner = next(name for name, outcome in outcomes.items() if outcome == "won")
    latest = publications.latest(dynamodb, table, pub)
    history, _ = publications.history(dynamodb, table, pub, limit=10)
    assert (latest["Revision"], latest["Name"]) == (2, winner)
    assert [h["Name"] for h in history] == [winner, "v1"]  # the loser left no revision behind
    with pytest.raises(Conflict, match="revision"):
        publications.edit(dynamodb, table, pub, {"Name": "stale"}, editor="e", expected_revision=1)


def test_every_item_the_write_path_writes_carries_version_and_entity(dynamodb, table, stack, tag):
    customer = f"cv-{tag}"
    line = {"ProductId": "p", "Quantity": 1, "UnitPrice": Decimal(1)}
    orders.place_order(dynamodb, table, customer, [line])
    follows.follow(dynamodb, table, f"{tag}-x", f"{tag}-y")
    publications.edit(dynamodb, table, f"pub-{tag}", {"Name": "n"}, editor="e")
    publications.add_title(dynamodb, table, f"pub-{tag}", "t", "T", tags=("a",))
    stores.put_store(dynamodb, table, {"Country": f"V{tag}", "Region": "R", "City": "C", "StoreId": "s",
                                       "Name": "n"})  # fmt: skip
    items = [unmarshal(i) for page in store.pages(dynamodb, "scan", TableName=table) for i in page["Items"]]
    mine = [i for i in items if tag in i["PK"] or tag in str(i.get("CustomerId", ""))]
    assert len(mine) >= 10
    assert all("Version" in i and "Entity" in i for i in mine), [i for i in mine if "Version" not in i]


def test_an_edge_another_writer_put_without_a_version_is_unfollowed(dynamodb, table, tag):
    from shop.model import FOLLOW

    a, b = f"{tag}-a", f"{tag}-b"
    edge = FOLLOW.item(
        {"FollowerId": a, "FolloweeId": b, "CreatedAt": "2026-11-27T10:00:00.000Z", "Version": 1}
    )
    edge.pop("Entity"), edge.pop("Version")  # as an existing service wrote it
    dynamodb.put_item(TableName=table, Item=store.marshal(edge))
    follows.unfollow(dynamodb, table, a, b)
    assert "Item" not in dynamodb.get_item(TableName=table, Key=store.marshal(FOLLOW.key(edge)))
