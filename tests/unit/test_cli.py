"""The command line's help: what each command does, with an example."""

from __future__ import annotations

import argparse

from hybridsync import cli


def test_every_command_says_what_it_does_and_shows_an_example():
    top = cli.parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in [("hybridsync", top), *commands.choices.items()]:
        assert sub.description, name
        assert "example: hybridsync" in sub.format_help(), name


def test_fault_plans_parse_or_say_what_is_wrong():
    import pytest

    from hybridsync.local.faults import FaultPlan

    assert FaultPlan.parse("duplicate=0.2,seed=3") == FaultPlan(seed=3, duplicate=0.2)
    assert not FaultPlan.parse("").active
    for text, message in (("bogus=1", "unknown fault 'bogus'"), ("duplicate=lots", "needs a number"),
                          ("fail_after=2", "a probability from 0 to 1")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            FaultPlan.parse(text)
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["up", "--faults", "bogus=1"])
