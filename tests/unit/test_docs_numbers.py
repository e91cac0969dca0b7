"""The numbers the docs quote about the code are the code's: how many functions the stacks
synthesize, how many stacks, routes and paths the API has, how many `hybridsync` commands. Each is
counted here from a cheap source read offline (the CDK app's source, `docs/openapi.json`, the CLI's
parser); `tests/infra/test_docs_numbers.py` holds the same counts to the synthesized templates.

Every page (README.md and docs/, the changelog aside: it is history) is scanned for a number
followed by one of the counted nouns ("the nine functions", "28 paths"); each must be the count.
Test counts are never quoted: they change with every test added (a page says "the suite" instead).
A number that counts something else (the local Lambda API's "two routes of its own") is listed in
ELSEWHERE with the words that say so."""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["zero", "one", "two", "three", "four", "five", "six"]
WORDS += ["seven", "eight", "nine", "ten", "eleven", "twelve"]
NUMBER = r"(?P<number>\d[\d,]*|" + "|".join(WORDS) + r")"
# a number, at most one word between (an adjective: "engine", "HTTP"), then what it counts
CLAIM = re.compile(
    NUMBER
    + r"\s+(?:[A-Za-z][\w-]*\s+)?"
    + r"(?P<noun>functions|stacks|routes|paths|`?hybridsync`? commands|tests)\b",
    re.IGNORECASE,
)
# phrases where the number counts something else, by the words around it
ELSEWHERE = (
    "has two routes of its own",  # the local Lambda API's routes for the alarms, not the HTTP API's
)


def functions() -> int:
    """The engine functions the stacks synthesize: each `hybridsync.functions.<name>.handler`
    module the pipeline stack builds a function of (`name="<module>"`, in the stack's module or the
    modules of its parts: the schedules and the operations function)."""
    handlers = {
        p.stem
        for p in (ROOT / "hybridsync" / "functions").glob("*.py")
        if re.search(r"^(def handler\b|handler = )", p.read_text(), re.M)
    }
    cdk = ROOT / "hybridsync" / "cdk"
    trees = [ast.parse((cdk / f"{name}.py").read_text()) for name in ("pipeline", "schedules", "operations")]
    built = {
        k.value.value
        for tree in trees
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        for k in call.keywords
        if k.arg == "name" and isinstance(k.value, ast.Constant)
    }
    assert handlers and handlers <= built, sorted(handlers - built)
    return len(handlers)


def stacks() -> int:
    """The stacks `hybridsync.cdk.app.build` makes: one `...Stack(app, ...)` call each."""
    tree = ast.parse((ROOT / "hybridsync" / "cdk" / "app.py").read_text())
    (build,) = (f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "build")
    return sum(
        1
        for call in ast.walk(build)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.endswith("Stack")
    )


def _operations() -> dict[str, dict]:
    return json.loads((ROOT / "docs" / "openapi.json").read_text())["paths"]


def paths() -> int:
    """The API's paths (`/orders/{id}`, ...) in the checked-in OpenAPI document."""
    return len(_operations())


def routes() -> int:
    """The API's routes: a method on a path (`GET /orders/{id}`), as API Gateway counts them."""
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return sum(1 for item in _operations().values() for method in item if method in methods)


def commands() -> int:
    """The `hybridsync` commands (an old name kept working is not one)."""
    from hybridsync.cli import reference

    return len(reference.commands())


@cache
def facts() -> dict[str, int | None]:
    return {
        "functions": functions(),
        "stacks": stacks(),
        "paths": paths(),
        "routes": routes(),
        "hybridsync commands": commands(),
        "tests": None,  # never quoted
    }


def value(number: str) -> int:
    number = number.lower()
    return WORDS.index(number) if number in WORDS else int(number.replace(",", ""))


def quoted(text: str) -> list[tuple[int, str, str, int]]:
    """(line, phrase, noun, number) of every claim in a page's text, code blocks included."""
    found = []
    flat = re.sub(r"\s+", " ", text)  # a claim may wrap across lines
    lines = [m.start() for m in re.finditer(r"\S+", text)]  # word starts, to find a claim's line back
    for m in CLAIM.finditer(flat):
        if any(phrase in flat[max(0, m.start() - 40) : m.end() + 40] for phrase in ELSEWHERE):
            continue
        words_before = len(flat[: m.start()].split())
        line = text.count("\n", 0, lines[words_before]) + 1 if words_before < len(lines) else 0
        found.append((line, m[0], m["noun"].lower().replace("`", ""), value(m["number"])))
    return found


def pages() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*.md") if p.name != "changelog.md"]
    return [ROOT / "README.md", *sorted(docs)]


def drift(pages: list[Path]) -> list[str]:
    wrong = []
    for page in pages:
        for line, phrase, noun, number in quoted(page.read_text()):
            truth = facts()[noun]
            if number != truth:
                where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name}:{line}"
                said = "a test count (never quoted: it changes with every test)" if truth is None else truth
                wrong.append(f"{where}: {phrase!r}, the code has {said}")
    return wrong


def test_each_fact_is_counted():
    counted = {noun: n for noun, n in facts().items() if noun != "tests"}
    assert all(isinstance(n, int) and n > 0 for n in counted.values()), counted
    assert counted["routes"] >= counted["paths"]


def test_every_number_the_docs_quote_about_the_code_is_the_codes():
    assert not drift(pages()), "\n".join(drift(pages()))


def test_a_stale_number_is_found(tmp_path):
    page = tmp_path / "stale.md"
    page.write_text(
        "The app runs the seven\nfunctions of its five stacks and 705 tests.\n"
        "The local Lambda API has two routes of its own.\n"
    )
    assert drift([page]) == [
        f"stale.md:1: 'seven functions', the code has {facts()['functions']}",
        "stale.md:2: '705 tests', the code has a test count (never quoted: it changes with every test)",
    ]


def test_pages_call_the_command_by_its_name():
    """`hybridsync ...`, as it runs once the venv is activated (Running locally says so once), not
    a path into this checkout's venv, which a project of yours does not have."""
    paths = [f"{p.relative_to(ROOT)}" for p in pages() if ".venv/bin/hybridsync" in p.read_text()]
    assert not paths, paths
