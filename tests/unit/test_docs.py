"""The docs site: the README's links land on pages and anchors of it, the generated references
are complete (every command, every setting the stacks read), every page is in the navigation.
`mkdocs build --strict` (in ./scripts/test) checks the links and anchors between pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import yaml

from hybridsync.cli import reference
from hybridsync.truth.context import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def anchors(page: Path) -> set[str]:
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m[1], "-") for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def test_the_readme_is_short_and_every_link_lands_in_the_site():
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") <= 150
    links = re.findall(r"\]\(([^)#]+)(?:#([^)]+))?\)", readme)
    assert len(links) >= 15
    for target, anchor in links:
        path = ROOT / target
        assert path.is_file(), target
        assert not anchor or anchor in anchors(path), f"{target}#{anchor}"


def test_the_cli_reference_has_every_command_with_its_example():
    text = reference.cli_markdown()
    flat = "".join(text.split())  # as --help prints it: wrapped at its width
    for name, command in reference.commands().items():
        assert f"## hybridsync {name}\n" in text, name
        assert command.epilog and command.epilog.startswith("example: hybridsync"), name
        assert "".join(command.epilog.split()) in flat, name
    # every line fits the page's column (and a terminal): no list of choices on one line
    assert max(map(len, text.splitlines())) <= 100, max(text.splitlines(), key=len)


def test_the_settings_reference_has_every_key_the_stacks_read():
    read = set()
    for path in (ROOT / "hybridsync" / "cdk").glob("*.py"):
        source = path.read_text()
        read |= set(re.findall(r'try_get_context\("(\w+)"\)', source))
        read |= set(re.findall(r'setting\("(\w+)"\)', source))
        for _, suffix in re.findall(r'setting\(f"\{(\w+)\}(\w+)"\)', source):
            read |= {key for key in SETTINGS if key.endswith(suffix)}
    assert read and read <= set(SETTINGS), sorted(read - set(SETTINGS))
    table = reference.settings_markdown()
    assert all(f"| `{key}` |" in table for key in SETTINGS)


def test_the_generated_pages_are_committed_as_their_generators_make_them_now():
    """On GitHub a page shows what is committed: the CLI, settings and HTTP references must hold
    their generated parts, current."""
    assert {str(p.relative_to(DOCS)) for p in reference.pages(DOCS)} >= {
        "reference/cli.md", "reference/settings.md", "reference/http-api.md"
    }  # fmt: skip
    stale = [str(p.relative_to(ROOT)) for p in reference.stale(DOCS)]
    assert not stale, f"{stale}: stale generated parts; run: python -m hybridsync.cli.reference --write"


def test_the_python_reference_renders_every_public_module_of_every_engine_package():
    """Every engine package has a page in the nav, and every module not named with an underscore
    (found on disk, not from the generator's own list) has a `:::` directive on its package's page."""
    nav = (ROOT / "mkdocs.yml").read_text()
    engine = ROOT / "hybridsync"
    for package in sorted(p.parent for p in engine.glob("*/__init__.py")):
        page = DOCS / "reference" / "python" / f"{package.name}.md"
        assert f"reference/python/{package.name}.md" in nav, package.name
        text = page.read_text()
        for module in package.rglob("*.py"):
            parts = module.relative_to(ROOT).with_suffix("").parts
            if parts[-1].startswith("_") or "versions" in parts or parts[-1] == "env":
                continue
            assert f"::: {'.'.join(parts)}\n" in text, (page.name, module)


def test_the_http_reference_has_every_route_of_the_document_with_a_valid_example():
    document = json.loads((DOCS / "openapi.json").read_text())
    page = (DOCS / "reference" / "http-api.md").read_text()
    routes = list(reference.operations(document))
    assert len(document["paths"]) >= 28 and len(routes) >= 35
    for path, method, operation in routes:
        section = page.split(f"\n### {method} {path}\n", 1)[1].split("\n### ", 1)[0]
        assert operation["summary"] in section, (method, path)
        for parameter in operation["parameters"]:
            assert f"| `{parameter['name']}` | {parameter['in']} |" in section, (method, path, parameter)
        target, body = reference.example_request(path, operation)
        assert f"\n{reference.curl_line(method, target, body)}\n" in section, (method, path)
        assert "{" not in target, target
        if body is not None:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            jsonschema.validate(body, schema)
        for parameter in operation["parameters"]:
            if parameter["in"] == "path":
                jsonschema.validate(reference.example_value(parameter["name"], parameter["schema"]),
                                    parameter["schema"])  # fmt: skip


def test_the_diagrams_are_mermaid_blocks_the_site_renders():
    """Diagrams are code: ```mermaid blocks, which the site renders (superfences' custom fence) and
    GitHub shows as diagrams too; the home page's architecture is one, no ASCII art."""
    config = (ROOT / "mkdocs.yml").read_text()
    assert "name: mermaid" in config and "pymdownx.superfences.fence_code_format" in config
    blocks = {
        str(page.relative_to(DOCS)): re.findall(r"^```mermaid\n(.*?)^```", page.read_text(), re.S | re.M)
        for page in DOCS.rglob("*.md")
    }
    found = [block for page in blocks.values() for block in page]
    assert len(found) >= 6 and blocks["index.md"], blocks
    assert all(block.split("\n", 1)[0] in ("flowchart TB", "sequenceDiagram") for block in found)
    assert "──►" not in (DOCS / "index.md").read_text()


def test_every_page_is_in_the_navigation():
    text = re.sub(r"!!python/\S+(?: \{[^}]*\})?", "null", (ROOT / "mkdocs.yml").read_text())
    config = yaml.safe_load(text)

    def pages(nav):
        for entry in nav:
            for value in entry.values():
                yield from pages(value) if isinstance(value, list) else [value]

    listed = set(pages(config["nav"]))
    assert listed == {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}


def test_each_command_is_handled_beside_its_arguments_in_its_groups_module():
    from hybridsync import cli

    by_name = reference.commands()
    for add in cli.COMMANDS:
        module = add.__module__
        assert module.startswith("hybridsync.cli.") and module != "hybridsync.cli.common"
        name = add.__name__.removeprefix("add_").replace("_", "-")
        assert by_name[name].get_default("run").__module__ == module, name
    assert len(cli.COMMANDS) == len(by_name)


def test_the_test_command_builds_the_docs_strictly_and_never_quietly():
    """`--quiet` drops the warnings `--strict` counts: with it a dead link passes (mkdocs 1.6)."""
    script = (ROOT / "scripts" / "test").read_text()
    build = next(line for line in script.splitlines() if "mkdocs build" in line and not line.startswith("#"))
    options = build.split()
    assert "--strict" in options, build
    assert not {"--quiet", "-q"} & set(options), build


def test_mermaid_comes_from_the_pinned_npm_package_never_a_cdn(tmp_path):
    """Offline or behind a proxy, a CDN's Mermaid leaves the diagrams as source: the site serves the
    pinned package's copy (mkdocs_hooks.py), which Material uses when it is loaded (it fetches from
    unpkg.com only when no `mermaid` global exists)."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import Files

    import mkdocs_hooks

    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["mermaid"]
    assert re.fullmatch(r"11\.\d+\.\d+", pinned), pinned  # exact, and the major Material drives
    config = yaml.safe_load(re.sub(r"!!python/\S+(?: \{[^}]*\})?", "null", (ROOT / "mkdocs.yml").read_text()))
    assert config["extra_javascript"] == [mkdocs_hooks.MERMAID_URI]
    site = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path))
    files = site.plugins.on_files(Files([]), config=site)  # as a build runs the hook
    served = files.get_file_from_path(mkdocs_hooks.MERMAID_URI)
    assert served is not None and Path(served.abs_src_path).stat().st_size > 1_000_000


def test_nested_lists_are_indented_as_the_site_renders_them():
    """Python-Markdown nests a list only under four spaces: two render it flat, one level."""
    wrong = []
    for page in [*DOCS.rglob("*.md"), ROOT / "CHANGELOG.md"]:
        text = re.sub(r"^\s*```.*?^\s*```", "", page.read_text(), flags=re.S | re.M)
        wrong += [f"{page.name}: {line}" for line in re.findall(r"^( +(?:[-*+]|\d+\.) .*)$", text, re.M)
                  if (len(line) - len(line.lstrip())) % 4]  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_the_node_requirement_is_stated_one_way():
    stated = {
        page: re.findall(r"Node\.js(?: \d+ or newer)?", (ROOT / page).read_text())
        for page in ("README.md", "docs/index.md", "docs/tutorial/index.md")
    }
    assert all(found == ["Node.js 22 or newer"] for found in stated.values()), stated


def test_the_readme_shows_the_home_pages_architecture_diagram():
    """GitHub renders a ```mermaid block; the README's is the site's home page's, kept equal."""
    block = re.compile(r"^```mermaid\n.*?^```$", re.S | re.M)
    readme = block.search((ROOT / "README.md").read_text())
    assert readme and readme[0] == block.search((DOCS / "index.md").read_text())[0]
