"""Reading and writing the DynamoDB side: versioned item writes, guarded transactions and signed page
cursors (store, cursors); the application's conflict-checked writes (writes); an item's size and
units as DynamoDB counts them (capacity); the view of a PostgreSQL row (views); large bodies,
distinct-key markers, index keys brought up to the model (large, distinct, reindex); paced scans,
point-in-time exports and a table per period (scans, exports, timeseries). It stands on the model
and the runtime; the SQL side is its sibling, never its import."""
