"""The global tables' twin decides without I/O (local/dynamodb/replication.py `Ledger`): last writer
wins on a per-item timestamp, every replica is brought to the winner, a replicated write read back
is no new write, and quick changes merge. The AWS pages are cited in the module."""

from __future__ import annotations

import itertools

import pytest

from hybridsync.local.dynamodb import replication
from hybridsync.local.dynamodb.replication import Ledger, RegionFault, Version, canonical

TABLE = "main"
KEY = (TABLE, canonical({"pk": {"S": "a"}}))


def item(value: str) -> dict:
    return {"pk": {"S": "a"}, "v": {"S": value}}


def ledger() -> Ledger:
    ticks = itertools.count(1)
    return Ledger({TABLE: ("home", "west")}, clock=lambda: float(next(ticks)))


def write(book: Ledger, region: str, recorded: bool | None) -> Version:
    """The replicator's write of the winner into `region`, answered as `recorded` says."""
    version = book.pending(region, KEY)
    assert version is not None
    book.applying(region, KEY, version)
    book.applied(region, KEY, version, recorded=recorded)
    return version


def replicate(book: Ledger, region: str) -> None:
    """The replicator's write of the winner into `region`, then its record read back there."""
    version = write(book, region, recorded=True)
    assert book.read(region, KEY, version.image) == []


def test_a_local_write_is_due_in_every_other_region_and_its_echo_is_no_new_write():
    book = ledger()
    assert book.read("home", KEY, item("x")) == [("west", KEY)]
    replicate(book, "west")
    assert book.pending("west", KEY) is None and book.local_writes == {"home": 1}


def test_the_later_of_two_racing_writes_wins_everywhere():
    book = ledger()
    book.read("home", KEY, item("home"))  # stamped 1
    assert book.read("west", KEY, item("west")) == [("home", KEY)]  # stamped 2: home must take it
    assert book.winners[KEY].image == item("west")
    replicate(book, "home")
    assert book.pending("west", KEY) is None and book.pending("home", KEY) is None


def test_a_replicated_write_landing_after_a_newer_local_one_is_won_back():
    """West takes home's version after a local write the replicator had not read yet: reading that
    local write then the echo, west is due its own newer write again."""
    book = ledger()
    book.read("home", KEY, item("old"))
    write(book, "west", recorded=True)
    assert set(book.read("west", KEY, item("new"))) == {("home", KEY)}  # read before the echo
    assert book.read("west", KEY, item("old")) == [("home", KEY), ("west", KEY)]
    assert book.overwritten == 1 and book.pending("west", KEY).image == item("new")


def test_quick_changes_merge_into_one_replicated_write():
    book = ledger()
    for value in "abc":
        book.read("home", KEY, item(value))
    assert book.pending("west", KEY).image == item("c")  # a and b never reach west
    replicate(book, "west")
    assert book.pending("west", KEY) is None


def test_a_write_that_changes_nothing_leaves_no_record_to_wait_for():
    """DynamoDB writes no stream record for a write that changes nothing (measured on DynamoDB
    Local too): the replica holds the winner at once."""
    book = ledger()
    book.read("home", KEY, item("x"))
    write(book, "west", recorded=False)
    assert book.pending("west", KEY) is None
    assert book.read("west", KEY, item("y")) == [("home", KEY)]  # a later write is local, not an echo


def test_a_failed_write_is_due_again():
    book = ledger()
    book.read("home", KEY, item("x"))
    version = write(book, "west", recorded=None)
    assert book.pending("west", KEY) == version


def test_a_write_that_got_no_answer_but_landed_is_never_taken_for_a_new_one():
    """West's put of A gets no answer (stopped mid-call) but landed; home writes B meanwhile. When
    west's record of A is read, it is A's, not a newer local write: B still wins everywhere."""
    book = ledger()
    book.read("home", KEY, item("A"))
    write(book, "west", recorded=None)
    book.read("home", KEY, item("B"))
    assert book.read("west", KEY, item("A")) == [("west", KEY)]  # west is due B, home owes nothing
    assert book.winners[KEY].image == item("B") and book.local_writes == {"home": 2}
    replicate(book, "west")
    assert book.settled("west", KEY) and book.settled("home", KEY)


def test_a_write_retried_after_no_answer_is_one_echo_and_a_later_local_write_alike_is_new():
    """West's put of X gets no answer twice, then lands: one record comes of the three. Later west
    writes X itself (an aggregate back to a value it had): a new write that wins, not an echo.
    Seen in the failover chaos run: taken for an echo, the twin wrote the older winner over it."""
    book = ledger()
    book.read("home", KEY, item("X"))
    for recorded in (None, None, True):
        write(book, "west", recorded=recorded)
    assert book.read("west", KEY, item("X")) == []  # the one record: the retries' echo
    assert book.read("west", KEY, item("Y")) == [("home", KEY)]  # west writes Y (a rebuild), then X
    assert book.read("west", KEY, item("X")) == [("home", KEY)]  # west's own X: due home, nothing west
    assert book.winners[KEY].region == "west" and book.local_writes == {"home": 1, "west": 2}


def test_a_write_that_got_no_answer_then_a_no_op_retry_still_knows_its_record():
    """West's put of A gets no answer but landed; its retry changes nothing (no record); home then
    writes B. West's record of A, read late, is the first put's, not a new write: B wins."""
    book = ledger()
    book.read("home", KEY, item("A"))
    write(book, "west", recorded=None)
    write(book, "west", recorded=False)
    book.read("home", KEY, item("B"))
    assert book.read("west", KEY, item("A")) == [("west", KEY)]  # west is due B
    assert book.winners[KEY].image == item("B") and book.local_writes == {"home": 2}


def test_writes_a_stopped_region_refused_leave_no_echo_a_later_local_write_could_be_taken_for():
    """West is down: the versions X, then Y, are refused (the connection, before anything was sent).
    Once back, Y lands. West later writes X itself: a new write, not the refused X's record.
    Seen in the failover chaos run: an aggregate back at a value it had while its Region was down."""
    book = ledger()
    for value in ("X", "Y"):
        book.read("home", KEY, item(value))
        book.refused("west", KEY, book.pending("west", KEY))
    replicate(book, "west")  # Y
    assert book.read("west", KEY, item("X")) == [("home", KEY)]
    assert book.winners[KEY].region == "west"


def test_a_write_whose_record_went_to_an_older_one_of_the_same_item_is_written_again(monkeypatch):
    """West's put of X gets no answer and did not land; X is written again and lands. Its one
    record is taken for the first X: west's newer write of X then awaits a record that never comes.
    Past ECHO_WAIT_S it is due again (a no-op write: held at once)."""
    book = ledger()
    book.read("home", KEY, item("X"))
    write(book, "west", recorded=None)
    book.read("home", KEY, item("Y"))
    book.read("home", KEY, item("X"))  # X again, newer
    again = write(book, "west", recorded=True)
    book.read("west", KEY, item("X"))  # its record, matched to the first X
    assert not book.settled("west", KEY) and book.pending("west", KEY) is None  # awaiting a record
    monkeypatch.setattr(replication, "ECHO_WAIT_S", 0.0)
    assert book.pending("west", KEY) == again


def test_settled_only_once_the_write_is_read_back():
    book = ledger()
    book.read("home", KEY, item("x"))
    version = book.pending("west", KEY)
    book.applying("west", KEY, version)
    assert book.pending("west", KEY) is None and not book.settled("west", KEY)  # written, not read back
    book.applied("west", KEY, version, recorded=True)
    book.read("west", KEY, item("x"))
    assert book.settled("west", KEY)


def test_a_delete_replicates_as_a_delete():
    book = ledger()
    book.read("home", KEY, item("x"))
    replicate(book, "west")
    assert book.read("west", KEY, None) == [("home", KEY)]
    assert book.pending("home", KEY).image is None


def test_items_compare_as_dynamodb_compares_them():
    """DynamoDB Local keeps an UpdateItem's `20.0` as written and reads a PutItem's back as `20`;
    a set's members come in any order."""
    assert canonical({"n": {"N": "20.0"}}) == canonical({"n": {"N": "20"}})
    assert canonical({"s": {"SS": ["b", "a"]}}) == canonical({"s": {"SS": ["a", "b"]}})
    assert canonical({"s": {"NS": ["1.50", "2"]}}) == canonical({"s": {"NS": ["2", "1.5"]}})
    assert canonical({"n": {"N": "20"}}) != canonical({"n": {"N": "21"}})


def test_a_region_fault_plan_reads_kind_region_start_and_length():
    plan = RegionFault.parse("partition=us-west-2@5+3, stop=eu-west-1@12.5+4")
    assert plan == [RegionFault("partition", "us-west-2", 5, 3), RegionFault("stop", "eu-west-1", 12.5, 4)]
    assert RegionFault.parse("") == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("flood=us-west-2@1+1", "partition or stop"),
        ("stop=us-west-2", "write KIND=REGION@START"),
        ("stop=us-west-2@x+1", "write KIND=REGION@START"),
        ("stop=us-west-2@1+0", "lasts more than 0 s"),
        ("stop=us-west-2@-1+2", "0 or later"),
    ],
)
def test_a_region_fault_plan_that_cannot_run_says_why(text, said):
    with pytest.raises(ValueError, match=said):
        RegionFault.parse(text)
