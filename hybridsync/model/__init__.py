"""The language a model is declared in and the value contract it keeps: tables, keys, indexes,
entities, aggregates and time series (declare); key text and the version clock (keys, versions);
what both sides can store (limits); values between DynamoDB and PostgreSQL (convert); which entity
an item is, read from its keys (placing); which model the engine serves (config); and the errors
the engine names (errors). It is the ground floor: it imports no other package of the engine."""
