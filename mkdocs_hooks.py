"""MkDocs hooks: the generated references (hybridsync/cli/reference.py) into their pages."""

from __future__ import annotations

import re
from typing import Any

from hybridsync.cli.reference import GENERATED


def on_page_markdown(markdown: str, **_: Any) -> str:
    return re.sub(r"<!-- generated: (\w+) -->", lambda m: GENERATED[m[1]](), markdown)
