"""The engine's Lambda handlers, one module per function; each serves the model the stacks name
(`HYBRIDSYNC_MODEL`), with the clients of `hybridsync.runtime.clients`. What ships to Lambda is
the engine's packages and the model's package (see `hybridsync.cdk.assets`)."""
