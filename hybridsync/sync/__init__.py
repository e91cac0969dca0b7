"""Stream consumers and the outbox: write-back, exactly-once aggregation, SQL -> DynamoDB, reconcile."""
