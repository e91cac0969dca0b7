"""The command line's help: what each command does, with an example."""

from __future__ import annotations

import argparse
import subprocess
import sys

from hybridsync import cli
from hybridsync.cli import reference


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


def test_the_help_lists_the_commands_and_an_old_name_still_runs():
    usage, listed = cli.parser().format_usage(), cli.parser().format_help().split("\n\n")[2]
    assert usage.split() == ["usage:", "hybridsync", "[-h]", "[--version]", "COMMAND", "..."], usage
    assert "\n    migrations " in listed and "\n    db " not in listed, listed
    assert cli.parser().parse_args(["db", "current"]).command == "db"  # `migrations`' old name


def test_a_redrive_of_a_source_it_cannot_apply_says_what_to_do_instead():
    import pytest

    for source in ("load", "aggregate"):
        with pytest.raises(SystemExit, match=r"hybridsync load.*aggregates rebuild"):
            cli.main(["dead-letters", "redrive", "--source", source, "--deployed"])  # before any call
    (letters,) = (c for n, c in reference.commands().items() if n == "dead-letters")
    assert "(load)" in " ".join(letters.format_help().split())


def test_a_reader_that_leaves_early_ends_a_command_quietly():
    """`hybridsync model | head -1`: the pipe closes under the command; no traceback, as Unix tools."""
    command = subprocess.Popen([sys.executable, "-m", "hybridsync.cli", "model"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)  # fmt: skip
    command.stdout.close()  # type: ignore[union-attr]
    errors = command.stderr.read().decode()  # type: ignore[union-attr]
    assert command.wait(timeout=60) == 1 and "Traceback" not in errors, errors
