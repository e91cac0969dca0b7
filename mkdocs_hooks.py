"""MkDocs hooks: the generated references (hybridsync/cli/reference.py) into their pages, as the
generators make them now (the pages hold a committed copy for GitHub's readers)."""

from __future__ import annotations

from typing import Any

from hybridsync.cli.reference import fill


def on_page_markdown(markdown: str, **_: Any) -> str:
    return fill(markdown)
