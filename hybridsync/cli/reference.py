"""The generated parts of the docs site: the CLI reference from the parser (every command, its help
and its example), the settings reference from the stacks' declaration of their context keys, and
the HTTP API reference from the OpenAPI document (`docs/openapi.json`: every route, its
parameters, body, answers and an example), and the Python reference's pages, one per engine
package (its modules' summaries from their docstrings; mkdocstrings renders each module's API
when the site is built).

Each is committed into its page between `<!-- generated: NAME -->` and `<!-- end generated -->`,
so the page reads whole on GitHub too; `python -m hybridsync.cli.reference --write` refreshes them
(`--check`: exit 1 naming each stale page; a unit test fails the same way). `mkdocs_hooks.py`
fills them again when the site is built, so the site never shows a stale one."""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hybridsync.truth.context import SETTINGS

END = "<!-- end generated -->"
# a marker, and what a previous --write put after it (up to its end marker), if anything
MARKER = re.compile(r"<!-- generated: (\w+) -->(?:(?:(?!<!-- generated: ).)*?" + re.escape(END) + ")?", re.S)
LOCAL_API = "http://127.0.0.1:8080"  # `hybridsync up --port 8080`
WIDTH = "100"  # argparse wraps help to the terminal's width: the same width always


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every `hybridsync` command's parser, by name (aliases left out)."""
    from hybridsync.cli import parser

    (sub,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    seen: dict[int, str] = {}
    for name, command in sub.choices.items():
        seen.setdefault(id(command), name)
    return {name: sub.choices[name] for name in seen.values()}


@contextmanager
def _columns() -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def cli_markdown() -> str:
    from hybridsync.cli import parser

    with _columns():
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


# --- the HTTP API, from its OpenAPI document -----------------------------------------------------


def root() -> Path:
    """The checkout this module belongs to (where mkdocs.yml is), else the working directory."""
    here = Path(__file__).resolve()
    return next((p for p in here.parents if (p / "mkdocs.yml").is_file()), Path.cwd())


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path, method, operation) of every route, in the document's order."""
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield path, method.upper(), operation


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _range(low: Any, high: Any, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"{low}-{high}{unit}"
    if low is not None:
        return f"at least {low}{unit}"
    return f"at most {high}{unit}" if high is not None else ""


def schema_words(schema: dict[str, Any]) -> str:
    """A schema in words: its type and every limit it states."""
    kind = schema.get("type")
    if "enum" in schema:
        words = "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    elif isinstance(kind, list):
        words = " or ".join(kind) + " (JSON)"
    elif kind == "string":
        words = {"date": "date (`YYYY-MM-DD`)", "date-time": "date-time (ISO 8601)"}.get(
            schema.get("format", ""),
            "base64 string" if schema.get("contentEncoding") == "base64" else "string",
        )
        if "pattern" in schema:
            words += f" matching `{schema['pattern']}`"
        length = _range(schema.get("minLength"), schema.get("maxLength"), " characters")
        words += f", {length}" if length else ""
    elif kind in ("integer", "number"):
        limits = _range(schema.get("minimum"), schema.get("maximum"))
        words = kind + (f" {limits}" if limits else "")
        words += f", in steps of {schema['multipleOf']}" if "multipleOf" in schema else ""
    elif kind == "array":
        items = schema.get("items", {})
        inner = "objects (fields below)" if items.get("type") == "object" else schema_words(items)
        count = _range(schema.get("minItems"), schema.get("maxItems"), " items")
        words = f"array of {inner}" + (f", {count}" if count else "")
    else:
        words = str(kind or "any JSON value")
    if "default" in schema:
        words += f", default `{schema['default']}`"
    if "description" in schema:
        words += f": {schema['description']}"
    return words


def _fields(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, bool, dict[str, Any]]]:
    """(name, required, schema) of a body's fields, nested objects' fields after their parent's."""
    required = set(schema.get("required", ()))
    for name, field in schema.get("properties", {}).items():
        yield f"{prefix}{name}", name in required, field
        items = field.get("items", {}) if field.get("type") == "array" else {}
        if items.get("type") == "object":
            yield from _fields(items, f"{prefix}{name}[].")
        elif field.get("type") == "object":
            yield from _fields(field, f"{prefix}{name}.")


def example_value(name: str, schema: dict[str, Any]) -> Any:
    """A valid value of the schema for an example: its own example or default, else the first a
    reader would type (`customer-1` for an id)."""
    if schema.get("examples"):
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):  # one of several types (a DECIMAL: number or string): the first
        return example_value(name, schema | {"type": kind[0]})
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        wanted = 1 if kind == "integer" else 10
        return max(low, wanted) if low is not None and (high is None or max(low, wanted) <= high) else wanted
    if kind == "boolean":
        return True
    if kind == "array":
        return [example_value(name, schema.get("items", {}))]
    if kind == "object":
        return example_body(schema)
    if schema.get("format") == "date" or "ISO-8601" in schema.get("description", ""):
        return "2026-11-22"
    if schema.get("format") == "date-time":
        return "2026-11-22T10:00:00Z"
    if schema.get("contentEncoding") == "base64":
        return "aGVsbG8="
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).lower().replace("_", " ").split()
    if "email" in words:
        return "someone@example.com"
    if words and words[-1] == "id":  # CustomerId, customer_id: customer-1
        return "-".join(words[:-1] or ["id"]) + "-1"
    return "-".join(words) + "-1"


def example_body(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema's own example, else a body of its required fields."""
    if schema.get("examples"):
        return schema["examples"][0]
    wanted = schema.get("required", ())
    return {n: example_value(n, f) for n, f in schema.get("properties", {}).items() if n in wanted}


def example_request(path: str, operation: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The example's path and query (required parameters, and those whose schema gives an
    example), and its body (the required fields), as the page shows them."""
    target, query = path, []
    for parameter in operation.get("parameters", []):
        value = example_value(parameter["name"], parameter["schema"])
        if parameter["in"] == "path":
            target = target.replace("{" + parameter["name"] + "}", quote(str(value), safe=""))
        elif parameter.get("required") or parameter["schema"].get("examples"):
            query.append(f"{parameter['name']}={quote(str(value), safe='')}")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    return target + ("?" + "&".join(query) if query else ""), None if body is None else example_body(body)


def curl_line(method: str, target: str, body: dict[str, Any] | None) -> str:
    words = ["curl", "-s"] + ([] if method == "GET" else ["-X", method]) + [shlex.quote(LOCAL_API + target)]
    if body is not None:
        words += ["-H", "'content-type: application/json'", "-d", shlex.quote(json.dumps(body))]
    return " ".join(words)


def _errors(operation: dict[str, Any]) -> dict[str, str]:
    """An operation's error answers, status by status: each `4XX` range's description names its
    statuses (`400: ...; 404: ...`)."""
    found = {}
    for status, response in operation["responses"].items():
        if status.upper().endswith("XX"):
            for code, meaning in re.findall(r"(\d{3}): (.*?)(?=; \d{3}: |$)", response["description"]):
                found[code] = meaning
        elif int(status) >= 400:
            found[status] = response["description"]
    return found


def _status(code: str) -> str:
    return f"{code} {HTTPStatus(int(code)).phrase}"


def http_api_markdown(document: dict[str, Any] | None = None) -> str:
    """Every route of the document by resource (its tag): method and path, summary, parameters,
    body fields, answers and errors, and a curl line for the local app."""
    document = document or json.loads((root() / "docs" / "openapi.json").read_text())
    every = list(operations(document))
    common = {}
    for _, _, operation in every:
        common |= _errors(operation)
    envelope = document.get("components", {}).get("schemas", {}).get("Error", {})
    fields = ", ".join(f"`{n}` ({s.get('type')})" for n, s in envelope.get("properties", {}).items())
    parts = [
        f"{len(every)} routes on {len(document['paths'])} paths, generated from `docs/openapi.json` "
        f"({document['info']['title']} {document['info']['version']}, OpenAPI {document['openapi']}).",
        "",
        "## Errors",
        "",
        f"Every error answers one JSON object, {fields}, the message naming what is wrong: "
        '`{"statusCode": 400, "message": "n must be an integer from 1 to 100, got \'0\'"}`. The statuses:',
        "",
        "| status | what it means |",
        "| --- | --- |",
        *(f"| {_status(code)} | {_cell(meaning)} |" for code, meaning in sorted(common.items())),
        "",
    ]
    tags: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, method, operation in every:
        tags.setdefault((operation.get("tags") or ["other"])[0], []).append((path, method, operation))
    for tag, routes in tags.items():
        parts += [f"## {tag}", ""]
        for path, method, operation in routes:
            parts += _route(path, method, operation, common)
    return "\n".join(parts)


def _route(path: str, method: str, operation: dict[str, Any], common: dict[str, str]) -> list[str]:
    parts = [f"### {method} {path}", ""]
    if operation.get("summary"):
        parts += [operation["summary"], ""]
    if operation.get("parameters"):
        parts += ["| parameter | in | required | type and limits |", "| --- | --- | --- | --- |"]
        for p in operation["parameters"]:
            needed = "yes" if p.get("required") else "no"
            parts.append(f"| `{p['name']}` | {p['in']} | {needed} | {_cell(schema_words(p['schema']))} |")
        parts.append("")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        closed = " (any other field is a 400)" if body.get("additionalProperties") is False else ""
        parts += [f"Body, JSON{closed}:", "", "| field | required | type and limits |", "| --- | --- | --- |"]
        parts += [
            f"| `{name}` | {'yes' if needed else 'no'} | {_cell(schema_words(field))} |"
            for name, needed, field in _fields(body)
        ]
        parts.append("")
    answers = [
        f"`{_status(code)}` {response['description']}"
        for code, response in operation["responses"].items()
        if code.isdigit() and int(code) < 400
    ]
    errors = _errors(operation)
    own = {code: meaning for code, meaning in errors.items() if common.get(code) != meaning}
    listed = ", ".join(f"`{code}`" + (f" {own[code]}" if code in own else "") for code in sorted(errors))
    parts += [f"Answers: {'; '.join(answers)}. Errors: {listed} ([what each means](#errors)).", ""]
    target, example = example_request(path, operation)
    parts += ["```sh", curl_line(method, target, example), "```", ""]
    return parts


def python_modules(package: str) -> dict[str, str]:
    """The public modules of one engine package (its own `__init__` first, then every module not
    named with an underscore, subpackages included, migration scripts not): name -> the first
    line of its docstring, read without importing it."""
    folder = root() / package.replace(".", "/")
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(root()).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1].startswith("_") or "versions" in parts or parts[-1] == "env":
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        found[".".join(parts)] = " ".join(docstring.split("\n\n")[0].split())
    return dict(sorted(found.items(), key=lambda item: (item[0] != package, item[0])))


def python_packages() -> list[str]:
    """The engine's packages, as the Python reference pages them."""
    return sorted(f"hybridsync.{p.parent.name}" for p in (root() / "hybridsync").glob("*/__init__.py"))


def python_index_markdown() -> str:
    rows = ["| package | what it is | modules |", "| --- | --- | --- |"]
    for package in python_packages():
        modules = python_modules(package)
        name = package.split(".")[1]
        rows.append(f"| [`{package}`]({name}.md) | {_cell(_sentence(modules[package]))} | {len(modules)} |")
    return "\n".join(rows)


def _sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".:") + "."  # a summary ending in a colon introduces a list


def python_package_markdown(package: str) -> str:
    """One package's page: its modules' summaries, then each module's API rendered by mkdocstrings
    from its docstrings when the site is built."""
    modules = python_modules(package)
    lines = [modules[package], "", "| module | what it is |", "| --- | --- |"]
    lines += [f"| [`{name}`](#{name.replace('.', '')}) | {_cell(_sentence(text))} |"
              for name, text in modules.items() if name != package]  # fmt: skip
    for name in modules:
        if name != package:
            lines += ["", f"## `{name}`", "", f"::: {name}", "    options:", "      show_root_heading: false",
                      "      heading_level: 3", "      show_submodules: false"]  # fmt: skip
            if _reexported(name):  # its names are documented once, where they are imported from
                lines += ["      members: false"]
    return "\n".join(lines)


def _reexported(module: str) -> bool:
    """Whether a module's package only re-exports names: its `__init__` holds nothing but imports
    and their `__all__`, as Powertools' packages and `hybridsync.model.declare` do."""
    parent = root() / module.rpartition(".")[0].replace(".", "/") / "__init__.py"
    if not parent.is_file():
        return False
    body = ast.parse(parent.read_text()).body

    def listing(node: ast.stmt) -> bool:
        return isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]

    kept = [n for n in body if not isinstance(n, ast.ImportFrom | ast.Expr)]  # imports, the docstring
    return bool(kept) and all(listing(n) for n in kept)


GENERATED: dict[str, Callable[[], str]] = {
    "cli": cli_markdown,
    "settings": settings_markdown,
    "http_api": http_api_markdown,
    "python_index": python_index_markdown,
    **{f"python_{p.split('.')[1]}": functools.partial(python_package_markdown, p) for p in python_packages()},
}


def fill(markdown: str) -> str:
    """The page with each generated part as the generator makes it now."""
    return MARKER.sub(
        lambda m: f"<!-- generated: {m[1]} -->\n\n{GENERATED[m[1]]().strip()}\n\n{END}", markdown
    )


def pages(docs: Path | None = None) -> list[Path]:
    """The docs pages that hold a generated part."""
    docs = docs or root() / "docs"
    return sorted(p for p in docs.rglob("*.md") if MARKER.search(p.read_text()))


def stale(docs: Path | None = None) -> list[Path]:
    return [p for p in pages(docs) if fill(p.read_text()) != p.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hybridsync.cli.reference",
        description="the docs' generated parts (CLI, settings, HTTP API, the Python API's pages) as "
        "their generators make them now",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the stale pages in place")
    args = parser.parse_args(argv)
    found = stale()
    for page in found:
        if args.write:
            page.write_text(fill(page.read_text()))
        print(f"{'refreshed' if args.write else 'stale'}: {page.relative_to(root())}")
    if found and not args.write:
        print("run: python -m hybridsync.cli.reference --write", file=sys.stderr)
    return 1 if found and not args.write else 0


if __name__ == "__main__":
    raise SystemExit(main())
