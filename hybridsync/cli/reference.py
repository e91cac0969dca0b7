"""The generated parts of the docs site: the CLI reference from the parser (every command, its
help and its example) and the settings reference from the stacks' declaration of their context
keys. `mkdocs_hooks.py` puts them into their pages when the site is built; tests check both are
complete."""

from __future__ import annotations

import argparse
import os

from hybridsync.cdk.context import SETTINGS


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every `hybridsync` command's parser, by name (aliases left out)."""
    from hybridsync.cli import parser

    (sub,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    seen: dict[int, str] = {}
    for name, command in sub.choices.items():
        seen.setdefault(id(command), name)
    return {name: sub.choices[name] for name in seen.values()}


def cli_markdown() -> str:
    os.environ.setdefault("COLUMNS", "100")  # argparse wraps to the terminal: the same width always
    from hybridsync.cli import parser

    parts = ["## hybridsync", "", "```text", parser().format_help().rstrip(), "```", ""]
    for name, command in commands().items():
        parts += [f"## hybridsync {name}", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def settings_markdown() -> str:
    rows = ["| setting | default | what it does |", "| --- | --- | --- |"]
    for name, setting in SETTINGS.items():
        default = "none" if setting.default is None else f"`{setting.default}`"
        rows.append(f"| `{name}` | {default} | {setting.means} |")
    return "\n".join(rows) + "\n"


GENERATED = {"cli": cli_markdown, "settings": settings_markdown}
