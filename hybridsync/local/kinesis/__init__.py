"""Kinesis Data Streams, locally: a table's streaming destination (its pump) and the shard readers
of the mappings on moto server's streams (`models`)."""
