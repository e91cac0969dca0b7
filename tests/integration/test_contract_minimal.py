"""The contract suite over the minimal model (tests/minimal_model): a table not named `main`, keys
`pk`/`sk`, no GSIs, reserved names of its own, a source that subtracts; no shop assumption holds."""

from hybridsync.testing.contract import *  # noqa: F403

HYBRIDSYNC_MODEL = "tests.minimal_model.model:MODEL"
