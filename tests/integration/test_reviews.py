"""Large review bodies (pattern 18) on the embedded DynamoDB and S3: every size round-trips intact,
a reader never sees a mix of two versions, and what a failure leaves behind is swept."""

from __future__ import annotations

import random
import uuid

import pytest

from hybridsync.dynamodb import store
from hybridsync.model.errors import Invalid
from shop import reviews
from shop.model import REVIEW

WORDS = ["kettle", "boils", "fast", "quiet", "handle", "lid", "spout", "steel", "water", "tea", "coffee"]


def text(size: int, seed: int = 1) -> str:
    """Review-like text (compresses about 3x), with some non-ASCII, of at least `size` bytes."""
    rng = random.Random(seed)
    words = []
    total = 0
    while total < size:
        word = rng.choice([*WORDS, "Zürich", "café", "東京"])
        words.append(word)
        total += len(word.encode()) + 1
    return " ".join(words)


def noise(size: int, seed: int = 2) -> str:
    """Text that hardly compresses (hex of random bytes)."""
    return random.Random(seed).randbytes(size // 2).hex()


@pytest.fixture(scope="module")
def bucket(stack):
    s3 = stack.client("s3")
    name = f"bodies-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def place(stack, bucket):
    return reviews.Place(stack.table_names["chunks"], stack.client("s3"), bucket)


@pytest.fixture
def table(stack):
    return stack.table_names["main"]


@pytest.fixture
def review():
    return {"ReviewId": f"r-{uuid.uuid4().hex[:8]}", "ProductId": "p-1", "CustomerId": "c-1", "Rating": 5,
            "Title": "Boils fast"}  # fmt: skip


def stored(dynamodb, table, review):
    return store.get(dynamodb, table, REVIEW.key(review))


@pytest.mark.parametrize(
    ("body", "kept_in"),
    [
        (text(500), "Body"),
        (text(50_000), "BodyGz"),
        (noise(1_000_000), "ChunkCount"),
        (noise(6_000_000), "BodyObject"),
    ],
    ids=["text", "gzip", "chunks", "s3"],
)
def test_every_size_round_trips_intact_where_its_size_says(dynamodb, table, place, review, body, kept_in):
    reviews.put_review(dynamodb, table, place, review, body)
    item = stored(dynamodb, table, review)
    assert [a for a in reviews.BODY_ATTRIBUTES if a in item and a != "ChunkVersion"] == [kept_in]
    assert item["BodyBytes"] == len(body.encode())
    assert reviews.get_review(dynamodb, table, place, "p-1", review["ReviewId"])["Body"] == body


def test_ten_megabytes_round_trip(dynamodb, table, place, review):
    body = text(10 * 1024 * 1024)
    reviews.put_review(dynamodb, table, place, review, body)
    assert reviews.get_review(dynamodb, table, place, "p-1", review["ReviewId"])["Body"] == body


def test_without_a_bucket_a_body_past_the_chunk_limit_is_refused(dynamodb, table, stack, review):
    place = reviews.Place(stack.table_names["chunks"], limits=reviews.Limits(chunked=100_000))
    with pytest.raises(Invalid, match="Body"):
        reviews.put_review(dynamodb, table, place, review, noise(400_000))


def test_the_item_limit_is_computed_before_writing(dynamodb, table, place, review):
    with pytest.raises(Invalid, match="Title") as error:
        reviews.put_review(dynamodb, table, place, review | {"Title": "x" * 410_000}, "short")
    assert "400" in str(error.value) or "409600" in str(error.value)
    assert stored(dynamodb, table, review) is None


def chunk_versions(dynamodb, place, review):
    items = [i for page in store.pages(dynamodb, "scan", TableName=place.chunks_table) for i in page["Items"]]
    return {int(i["ChunkVersion"]["N"]) for i in items if review["ReviewId"] in i["ParentSK"]["S"]}


def test_a_new_version_replaces_the_old_chunks_without_mixing(dynamodb, table, place, review):
    reviews.put_review(dynamodb, table, place, review, noise(600_000, seed=1))
    old = stored(dynamodb, table, review)["ChunkVersion"]
    new_body = noise(900_000, seed=2)
    reviews.put_review(dynamodb, table, place, review, new_body)
    item = stored(dynamodb, table, review)
    assert item["ChunkVersion"] > old
    assert chunk_versions(dynamodb, place, review) == {item["ChunkVersion"]}
    assert reviews.get_review(dynamodb, table, place, "p-1", review["ReviewId"])["Body"] == new_body


class CrashBeforeSwitch:
    """A client that dies when the writer switches the item to its new chunks."""

    def __init__(self, client):
        self._client = client

    def put_item(self, **request):  # the switch: one conditional PutItem
        raise ConnectionError("the writer died")

    transact_write_items = put_item

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_half_written_version_leaves_the_old_body_whole_and_the_sweep_removes_it(
    dynamodb, table, place, review
):
    old_body = noise(600_000, seed=3)
    reviews.put_review(dynamodb, table, place, review, old_body)
    with pytest.raises(ConnectionError):
        reviews.put_review(CrashBeforeSwitch(dynamodb), table, place, review, noise(900_000, seed=4))
    assert len(chunk_versions(dynamodb, place, review)) == 2  # the new chunks are there, unnamed
    assert reviews.get_review(dynamodb, table, place, "p-1", review["ReviewId"])["Body"] == old_body
    assert reviews.sweep(dynamodb, table, place, older_than_s=3600)["chunks"] == 0  # may be in progress
    assert reviews.sweep(dynamodb, table, place, older_than_s=0)["chunks"] >= 1
    assert chunk_versions(dynamodb, place, review) == {stored(dynamodb, table, review)["ChunkVersion"]}
    assert reviews.get_review(dynamodb, table, place, "p-1", review["ReviewId"])["Body"] == old_body


class SwitchWhileReading:
    """A client whose first chunk read lets a writer replace the body first."""

    def __init__(self, client, replace):
        self._client, self._replace = client, replace

    def batch_get_item(self, **request):
        if self._replace:
            self._replace()
            self._replace = None
        return self._client.batch_get_item(**request)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_reader_caught_by_a_version_switch_returns_the_new_body_whole(dynamodb, table, place, review):
    reviews.put_review(dynamodb, table, place, review, noise(600_000, seed=5))
    new_body = noise(700_000, seed=6)
    reader = SwitchWhileReading(
        dynamodb, lambda: reviews.put_review(dynamodb, table, place, review, new_body)
    )
    assert reviews.get_review(reader, table, place, "p-1", review["ReviewId"])["Body"] == new_body


class S3DeleteFails:
    def __init__(self, s3):
        self._s3 = s3

    def delete_object(self, **request):
        raise ConnectionError("S3 is unreachable")

    def __getattr__(self, name):
        return getattr(self._s3, name)


def test_an_object_s3_failed_to_delete_after_the_dynamodb_write_is_swept(dynamodb, table, place, review):
    small = reviews.Limits(in_item=1000, chunked=2000)
    reviews.put_review(dynamodb, table, reviews.Place(place.chunks_table, place.s3, place.bucket, small),
                       review, noise(10_000, seed=7))  # fmt: skip
    first = stored(dynamodb, table, review)["BodyObject"]
    failing = reviews.Place(place.chunks_table, S3DeleteFails(place.s3), place.bucket, small)
    newest = noise(12_000, seed=8)
    reviews.put_review(dynamodb, table, failing, review, newest)  # the item moved on; the old object stayed
    second = stored(dynamodb, table, review)["BodyObject"]
    listed = {o["Key"] for o in place.s3.list_objects_v2(Bucket=place.bucket)["Contents"]}
    assert {first, second} <= listed
    assert reviews.sweep(dynamodb, table, place, older_than_s=0)["objects"] >= 1
    listed = {o["Key"] for o in place.s3.list_objects_v2(Bucket=place.bucket)["Contents"]}
    assert first not in listed and second in listed
    assert reviews.get_review(dynamodb, table, place, "p-1", review["ReviewId"])["Body"] == newest
