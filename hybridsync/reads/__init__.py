"""Reads across both sides: cache-aside reads of entities mastered in PostgreSQL, read from their
DynamoDB view and populated on a miss (cache), and the top-N of a write-sharded ranking, a declared
aggregate's or an entity's (rankings). The HTTP edge and a project's routes read through it."""
