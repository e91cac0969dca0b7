"""The PostgreSQL side: the schema as SQLAlchemy metadata, rendered from the model (schema); the
logins every function uses, each the least it needs (roles); writes of entities mastered in
PostgreSQL (rows); the dead-letter store every consumer reports to (deadletters); and the Alembic
migrations of the engine's branch and the project's (migrations). It stands on the model, the
stream vocabulary and the runtime; the DynamoDB side is its sibling, never its import."""
