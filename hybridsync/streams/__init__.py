"""The vocabulary of a stream record, shared by every consumer and the local app's readers: the
seam every consumer reads a change through (`changes`: one registry of change sources, each
reading a record once into a typed change), how one that can never be applied is turned away
(`Rejected` -> `DeadLetter`), and Lambda's event-filter grammar, evaluated as Lambda does. It
imports nothing of the engine but the model's errors (where `Rejected` lives): every layer above
may speak it."""
