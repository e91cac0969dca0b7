"""The write path: what a write costs, and whether what was written reads back, in one run.

On moto server + embedded PostgreSQL:

  vertical partition   a price change rewrites the ~300 B availability item (through the outbox),
                       against rewriting one item that holds details and availability together:
                       write units by DynamoDB's size arithmetic on the items actually stored
  large items          review bodies from 1 KB to 10 MB stored by size (text, gzip in the item,
                       gzip chunks, gzip in S3) and read back; the largest intact body, gzip ratio
  review put           a 50 KB review (gzip in the item): one conditional PutItem, the Inverted
                       index projecting what its readers use, against the design before (a
                       one-item transaction: 2x; Inverted projecting ALL: the body copied again);
                       write units by the capacity model on the item as stored, and DynamoDB
                       Local's reported units for the put
  place order          an order with 3 lines in one TransactWriteItems (ref, header, lines,
                       #static item) against one plain PutItem of the header alone, p50 each
  #static contention   two writer processes placing orders at once, for one customer and for two:
                       DynamoDB cancels a transaction whose item (the customer's #static counter)
                       another one is writing (TransactionConflict; DynamoDB Local serializes
                       instead, so the fault layer's conflict kind cancels as DynamoDB does); the
                       conflicts, and the placements that failed after retrying in place
  version history      N edits of a publication; every revision and v0 read back and compared

Usage: python bench/writes.py [--quick | --smoke]   (--quick: 50 orders and 20 revisions instead of 300
and 100; --smoke: 5 of each and bodies up to 5 MB, seconds: the same code path and JSON keys)
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import statistics
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from decimal import Decimal
from pathlib import Path

from rich.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridsync import local  # noqa: E402
from hybridsync.dynamodb import capacity, store  # noqa: E402
from hybridsync.local.dynamodb import faults as dynamodb_faults  # noqa: E402
from hybridsync.model.convert import marshal  # noqa: E402
from hybridsync.model.declare import Projection  # noqa: E402
from hybridsync.runtime import aws, db  # noqa: E402
from hybridsync.sync import outbox  # noqa: E402
from hybridsync.workloads import scratch  # noqa: E402
from shop import catalog, orders, publications, reviews  # noqa: E402
from shop.model import MAIN, MODEL, ORDER, PRODUCT_AVAILABILITY, PRODUCT_DETAILS, REVIEW  # noqa: E402

SIZES = (1_000, 50_000, 600_000, 3_000_000, 10 * 1024 * 1024)


def body(size: int, rng: random.Random) -> str:
    """Review-like text: words, some repetition, some noise (compresses 2-4x)."""
    words = ["kettle", "boils", "quiet", "handle", "Zürich", "café", "steel", "spout", "東京"]
    parts, total = [], 0
    while total < size:
        part = rng.choice(words) if rng.random() < 0.7 else rng.randbytes(3).hex()
        parts.append(part)
        total += len(part.encode()) + 1
    return " ".join(parts)[:size]


def main_before() -> object:
    """The main table as it was declared before: the Inverted index projecting ALL."""
    indexes = tuple(dataclasses.replace(i, projection=Projection.ALL, non_key_attributes=())
                    if i.name == "Inverted" else i for i in MAIN.indexes)  # fmt: skip
    return dataclasses.replace(MAIN, indexes=indexes)


def place_concurrently(
    endpoint: str, table: str, customer: str, n: int, claims: str, seed: int
) -> tuple[int, int]:
    """One writer process: n orders for `customer`, DynamoDB's transaction conflicts emulated
    against the other writer's claims. Returns (conflicts met, placements that failed)."""
    client = aws.client("dynamodb", endpoint, "us-east-1")
    met = []
    dynamodb_faults.inject(client.meta.events, f"conflict=1.0,seed={seed},conflict_dir={claims}", met.append)
    lines = [{"ProductId": f"p{k}", "Quantity": k, "UnitPrice": Decimal("9.99")} for k in range(1, 4)]
    failed = []
    for k in range(n):
        try:
            orders.place_order(client, table, customer, lines, idempotency_key=f"race-{seed}-{k}")
        except orders.Conflict as error:
            failed.append(f"{error} {error.codes}")
    return len(met), failed


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer orders and revisions (under a minute)")
    parser.add_argument("--smoke", action="store_true", help="5 orders, 5 revisions: seconds")
    args = parser.parse_args()
    n_orders, n_revisions = (5, 5) if args.smoke else (50, 20) if args.quick else (300, 100)
    sizes = (*SIZES[:-1], 5 * 1024 * 1024) if args.smoke else SIZES  # each way of storing a body, in S3 too
    rng = random.Random(20261122)
    state = scratch("bench-")
    with local.start(state, prefix="bench") as stack, Progress() as progress:
        client, table = stack.client(), stack.table_names["main"]
        engine = db.create_engine(stack.database_url)
        place = reviews.Place(stack.table_names["chunks"], stack.client("s3"), stack.bucket_names["bodies"])

        # vertical partitioning: measured on the items the outbox drain really wrote
        product = f"p-{uuid.uuid4().hex[:6]}"
        details = {"ProductId": product, "Name": "Kettle", "Category": "kitchen",
                   "Description": "A quiet 1.7 l kettle with a brushed steel body and a soft lid. " * 40,
                   "Attributes": {"colors": ["red", "black", "white"], "watts": 2200}}  # fmt: skip
        catalog.put_product(engine, details, {"ProductId": product, "Price": Decimal("24.99"), "Stock": 12})
        catalog.set_price(engine, product, Decimal("19.99"))
        outbox.drain_all(engine, client, MODEL, stack.table_names)
        stored_details = store.get(client, table, PRODUCT_DETAILS.key({"ProductId": product}))
        stored_availability = store.get(client, table, PRODUCT_AVAILABILITY.key({"ProductId": product}))
        split_wu = capacity.write_units(stored_availability)
        combined_wu = capacity.write_units(stored_details | stored_availability)

        # large items
        task = progress.add_task(f"review bodies, 1 KB to {sizes[-1] // 2**20} MB", total=len(sizes))
        largest, raw_total, packed_total, storage = 0, 0, 0, {}
        for size in sizes:
            text = body(size, rng)
            review = {"ReviewId": f"r-{size}", "ProductId": product, "CustomerId": "c-1", "Rating": 4,
                      "Title": f"{size} bytes"}  # fmt: skip
            shown = reviews.put_review(client, table, place, review, text)
            back = reviews.get_review(client, table, place, product, review["ReviewId"])["Body"]
            if back == text:
                largest = max(largest, len(text.encode()))
            raw_total += len(text.encode())
            packed_total += len(gzip.compress(text.encode(), mtime=0))
            storage[size] = shown["Storage"]
            progress.advance(task)

        # a review: one conditional put against the design before
        text = body(50_000, rng)
        review = {
            "ReviewId": "r-put",
            "ProductId": product,
            "CustomerId": "c-1",
            "Rating": 5,
            "Title": "Quiet",
        }
        meter = capacity.Meter()
        meter.attach(client)
        reviews.put_review(client, table, place, review, text)
        put_calls = [c for operation, c in meter.calls if operation in ("PutItem", "TransactWriteItems")]
        meter.detach(client)
        stored_review = store.get(client, table, REVIEW.key(review))
        review_wu = capacity.write_cost(MAIN, None, stored_review)
        review_wu_before = capacity.write_cost(main_before(), None, stored_review, transactional=True)

        # place order vs a plain put of the header
        task = progress.add_task("orders", total=n_orders)
        placed, plain = [], []
        lines = [{"ProductId": f"p{k}", "Quantity": k, "UnitPrice": Decimal("9.99")} for k in range(1, 4)]
        for n in range(n_orders):
            start = time.perf_counter()
            order, _ = orders.place_order(client, table, f"c-{n % 40}", lines, idempotency_key=f"bench-{n}")
            placed.append(time.perf_counter() - start)
            header = ORDER.item(ORDER.values(order) | {"OrderId": f"plain-{n}"})
            start = time.perf_counter()
            client.put_item(TableName=table, Item=marshal(header))
            plain.append(time.perf_counter() - start)
            progress.advance(task)

        # version history: every revision reads back as written
        task = progress.add_task("publication revisions", total=n_revisions)
        pub = f"pub-{uuid.uuid4().hex[:6]}"
        written = {}
        for k in range(1, n_revisions + 1):
            edit = {"Name": f"Name {k}", "Description": rng.randbytes(8).hex()}
            publications.edit(client, table, pub, edit, editor=f"e{k % 3}")
            written[k] = edit
            progress.advance(task)
        history, cursor = [], None
        while True:
            page, cursor = publications.history(client, table, pub, limit=25, cursor=cursor)
            history += page
            if cursor is None:
                break
        history_ok = (
            [h["Revision"] for h in history] == list(range(n_revisions, 0, -1))
            and all(h["Name"] == written[h["Revision"]]["Name"] for h in history)
            and all(
                publications.revision(client, table, pub, k)["Description"] == e["Description"]
                for k, e in written.items()
            )
            and publications.latest(client, table, pub)["Name"] == written[n_revisions]["Name"]
        )
        engine.dispose()

        # the #static counter under two concurrent writers: one customer, then two
        contention = {}
        claims = str(scratch("bench-claims-"))
        with ProcessPoolExecutor(2) as pool:
            for label, customers in (("one", ["c-race", "c-race"]), ("two", ["c-race-a", "c-race-b"])):
                seeds = [k + (0 if label == "one" else 10) for k in range(len(customers))]
                endpoint = stack.dynamodb_endpoint
                runs = [pool.submit(place_concurrently, endpoint, table, c, n_orders, claims, k)
                        for k, c in zip(seeds, customers, strict=True)]  # fmt: skip
                results = [r.result() for r in runs]
                contention[label] = (sum(r[0] for r in results), [why for r in results for why in r[1]])

    figures = {
        "split_item_bytes": capacity.item_size(stored_availability),
        "combined_item_bytes": capacity.item_size(stored_details | stored_availability),
        "split_write_units": split_wu,
        "combined_write_units": combined_wu,
        "vertical_partition_wu_ratio": round(split_wu / combined_wu, 3),
        "large_item_roundtrip_bytes": largest,
        "storage_by_size": {str(k): v for k, v in storage.items()},
        "gzip_ratio": round(packed_total / raw_total, 3),
        "review_item_bytes": capacity.item_size(stored_review),
        "review_put_wu": review_wu,
        "review_put_wu_before": review_wu_before,
        "review_put_consumed_wu": sum(c.consumed or 0 for c in put_calls),
        "review_put_requests": [operation for operation, _ in meter.calls if "Item" in operation],
        "static_conflicts_one_customer": contention["one"][0],
        "static_conflicts_two_customers": contention["two"][0],
        "static_placements_failed": len(contention["one"][1] + contention["two"][1]),
        "static_failures": sorted(set(contention["one"][1] + contention["two"][1]))[:3],
        "static_placements": 4 * n_orders,
        "place_order_p50_ms": p50_ms(placed),
        "plain_put_p50_ms": p50_ms(plain),
        "place_order_vs_put_ratio": round(statistics.median(placed) / statistics.median(plain), 2),
        "history_revisions": n_revisions,
        "history_ok": history_ok,
    }
    print(f"price change: {split_wu} WCU for the availability item ({figures['split_item_bytes']} B) vs "
          f"{combined_wu} WCU for one combined item ({figures['combined_item_bytes']} B)")  # fmt: skip
    print(f"review bodies: largest intact {largest:,} B; gzip to {figures['gzip_ratio']:.0%}; stored as "
          + ", ".join(f"{k:,} B: {v}" for k, v in storage.items()))  # fmt: skip
    print(f"review put ({figures['review_item_bytes']:,} B item): {review_wu:g} write units, one conditional "
          f"PutItem (DynamoDB Local reported {figures['review_put_consumed_wu']:g}), against "
          f"{review_wu_before:g} before (a one-item transaction, Inverted projecting ALL)")  # fmt: skip
    print(f"#static counter, two writers placing {n_orders} orders each at once: {contention['one'][0]} "
          f"conflicts for one customer, {contention['two'][0]} for two; placements failed after retrying "
          f"in place: {figures['static_placements_failed']} of {figures['static_placements']}")  # fmt: skip
    print(f"place order (3 lines, one transaction): p50 {figures['place_order_p50_ms']} ms vs plain PutItem "
          f"{figures['plain_put_p50_ms']} ms ({figures['place_order_vs_put_ratio']}x)")  # fmt: skip
    print(f"version history: {n_revisions} revisions, every one read back as written: {history_ok}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
