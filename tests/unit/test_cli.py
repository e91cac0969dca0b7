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
