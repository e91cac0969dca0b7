"""The engine's contract suite over the shop's model (the project's): what a user's project runs
with one import."""

from hybridsync.testing.contract import *  # noqa: F403
