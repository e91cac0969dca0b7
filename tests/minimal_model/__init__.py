"""A minimal model the engine's suite also runs on: a table not named `main`, keys `pk`/`sk`, no
GSIs, no TTL, other reserved names; so no assumption of the shop's can creep back into the engine."""
