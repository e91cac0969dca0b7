"""hybridsync: keep Amazon DynamoDB and PostgreSQL in sync, and the DynamoDB access patterns around it."""
