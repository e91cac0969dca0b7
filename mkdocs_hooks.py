"""MkDocs hooks: the generated references (hybridsync/cli/reference.py) into their pages, as the
generators make them now (the pages hold a committed copy for GitHub's readers); and Mermaid from
the pinned npm package (package.json), so diagrams render offline and behind a proxy: Material
fetches Mermaid from unpkg.com only when no `mermaid` global is loaded already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from hybridsync.cli.reference import fill

MERMAID = Path(__file__).parent / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
MERMAID_URI = "assets/javascripts/mermaid.min.js"  # mkdocs.yml's extra_javascript names it


def on_page_markdown(markdown: str, **_: Any) -> str:
    return fill(markdown)


def on_files(files: Files, config: Any, **_: Any) -> Files:
    if not MERMAID.is_file():
        raise PluginError(
            f"{MERMAID} is missing: run `npm ci` (./scripts/docs does it) for the pinned Mermaid"
        )
    files.append(File.generated(config, MERMAID_URI, abs_src_path=str(MERMAID)))
    return files
