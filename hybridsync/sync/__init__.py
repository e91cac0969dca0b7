"""The sync itself: the stream consumers and the outbox (write-back to PostgreSQL, exactly-once
aggregation, SQL -> DynamoDB), reconcile both ways, the failed batches and their redrive, and the
long operations cut into checkpointed jobs (jobs: the loads, the aggregates' rebuild, what the
operations function runs). It stands on both sides and the layers below them; the consumers never
import each other."""
