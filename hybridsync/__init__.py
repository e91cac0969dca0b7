"""hybridsync: keep Amazon DynamoDB and PostgreSQL in sync, and the DynamoDB access patterns around it."""

__version__ = "0.1.0"  # the one place (pyproject.toml reads it)
