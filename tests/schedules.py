"""Delivery schedules a DynamoDB stream event source mapping can produce, for property tests."""

from __future__ import annotations

from hypothesis import strategies as st


def schedules(n_records):
    """Contiguous batches in order (as a shard delivers them); each may also be redelivered 1-2
    more times at any later point, and any delivery may arrive bisected into halves."""

    @st.composite
    def build(draw):
        cuts = sorted(draw(st.sets(st.integers(1, n_records - 1), max_size=8)))
        batches = [(a, b) for a, b in zip([0, *cuts], [*cuts, n_records], strict=True)]
        deliveries = [[b] for b in batches]
        for i, batch in enumerate(batches):
            for _ in range(draw(st.integers(0, 2))):
                later = draw(st.integers(i, len(deliveries) - 1))
                deliveries[later].append(batch)
        flat = [b for slot in deliveries for b in slot]
        out = []
        for a, b in flat:
            if b - a > 1 and draw(st.booleans()):
                mid = (a + b) // 2
                out += [(a, mid), (mid, b)]
            else:
                out.append((a, b))
        return out

    return build()
