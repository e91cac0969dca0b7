"""What the commands share: registering one (`Commands`), the scans' options and progress,
the model's tables by name, PostgreSQL's URL, what a scan cost."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hybridsync.dynamodb.scans import DEFAULT_RATE
from hybridsync.model import config


class Parser(argparse.ArgumentParser):
    """argparse's parser, which also says what a misspelt flag or command was likely meant to be."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # said by the (sub)command they were given to, with its flags' likeliest
            chain = _chosen(self, parsed)
            options = [option for parser in chain for option in parser._option_string_actions]
            chain[-1].error(f"unrecognized arguments: {' '.join(extras)}" + _meant(extras, options))
        return parsed

    def error(self, message: str) -> Any:  # type: ignore[override]
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if found:
            message += _meant([found.group(1)], re.findall(r"'([^']*)'", found.group(2)))
        return super().error(message)


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """The parser and the (sub)commands' parsers the command line named, outermost first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(parsed, action.dest, None)
            if chosen in action.choices:
                return [parser, *_chosen(action.choices[chosen], parsed)]
    return [parser]


def _meant(given: list[str], known: list[str]) -> str:
    import difflib

    for word in given:
        close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


class Commands:
    """The `hybridsync` subcommands: each added with its summary, its example and what runs it."""

    def __init__(self, subparsers: Any):
        self.subparsers = subparsers

    def add(self, name: str, summary: str, example: str, run: Any) -> argparse.ArgumentParser:
        sub = self.subparsers.add_parser(
            name, help=summary, description=summary, epilog=f"example: {example}"
        )
        sub.set_defaults(run=run)
        return sub


def scan_options(sub: argparse.ArgumentParser, paced: str = "read units") -> None:
    sub.add_argument("--segments", type=int, default=1, help="parallel scan segments (default 1)")
    sub.add_argument("--rate", type=float, default=DEFAULT_RATE,
                     help=f"pace to this many {paced} per second (default {DEFAULT_RATE:g}; "
                     "0: as fast as DynamoDB answers)")  # fmt: skip
    sub.add_argument("--page-limit", type=int, help="items per Scan request (smaller pages spread load)")


def tables() -> dict[str, str]:
    """Logical -> physical name of the model's tables, from `TABLE_<NAME>` (`source .local/env`)."""
    names = {t.name: os.environ.get(f"TABLE_{t.name.upper()}", "") for t in config.model().tables}
    missing = [f"TABLE_{n.upper()}" for n, physical in names.items() if not physical]
    if missing:
        raise SystemExit(
            f"no {', '.join(missing)}: set them (e.g. `source .local/env` beside `hybridsync up`)"
        )
    return names


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def unreachable(error: BaseException) -> str | None:
    """One line for an endpoint that does not answer (DynamoDB, S3, PostgreSQL: a stopped
    `hybridsync up`, whose `.local/env` a shell still holds), or None for any other error."""
    from urllib.parse import urlsplit

    from botocore.exceptions import EndpointConnectionError

    if isinstance(error, EndpointConnectionError):
        url = str(error.kwargs.get("endpoint_url", ""))
        dynamodb = os.environ.get("DYNAMODB_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        what = "DynamoDB" if dynamodb and url.startswith(dynamodb.rstrip("/")) else "the AWS endpoint"
        host, where = urlsplit(url).hostname or "", url
    else:
        cause = getattr(error, "orig", None) or error  # SQLAlchemy's wrapper, or psycopg's own
        if type(cause).__module__.split(".")[0] != "psycopg" or getattr(cause, "sqlstate", True) is not None:
            return None  # an error the server answered, or not a database's
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
        if "connection" not in first:
            return None
        found = re.search(r'server at "([^"]+)", port (\d+)', first)
        host = found.group(1) if found else ""
        what, where = "PostgreSQL", f"{host}:{found.group(2)}" if found else first
    if host in LOCAL_HOSTS:
        return (
            f"{what} at {where} does not answer: is `hybridsync up` running? (each start picks new "
            "ports: `source .local/env` again after a restart)"
        )
    return f"{what} at {where} does not answer: check the address, the network, and that it runs"


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def given(value: str | None, variable: str, what: str, flag: str) -> str:
    """A flag's value, else the environment's, else a clear error saying how to give it."""
    value = value or os.environ.get(variable)
    if not value:
        raise SystemExit(f"no {what}: pass {flag} or set {variable} (e.g. `source .local/env`)")
    return value


def database_url(args: argparse.Namespace) -> str:
    return given(args.url, "DATABASE_URL", "database", "--url")


def table_name(args: argparse.Namespace) -> str:
    """`--table`, else the model's first table (`TABLE_<NAME>`)."""
    return args.table or tables()[config.model().tables[0].name]


def declared(physical: str) -> Any:
    """The model's table a physical name is of (by `TABLE_<NAME>`), else the model's first."""
    model = config.model()
    return next(
        (t for t in model.tables if os.environ.get(f"TABLE_{t.name.upper()}") == physical), model.tables[0]
    )


def show_keys(keys: list, limit: int = 10) -> str:
    shown = ", ".join("/".join(map(str, k)) for k in keys[:limit])
    return shown + (f" ... (+{len(keys) - limit})" if len(keys) > limit else "")


@contextlib.contextmanager
def scanning(what: str) -> Iterator[Callable[[Any], None]]:
    """A live line while a scan runs (items, requests, read units so far), gone when it ends."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True) as progress:
        task = progress.add_task(what)

        def update(cost: Any) -> None:
            progress.update(
                task,
                description=f"{what}: {cost.items_read:,} items, {cost.requests:,} "
                f"requests, {cost.read_units:,.1f} read units",
            )

        yield update


def scanner(
    args: argparse.Namespace, table: str, progress: Callable[[Any], None], index: str | None = None
) -> Any:
    from hybridsync.dynamodb.scans import Scanner
    from hybridsync.runtime import aws

    return Scanner(
        aws.client("dynamodb"),
        table,
        index,
        segments=args.segments,
        page_limit=args.page_limit,
        rate=args.rate or None,
        consistent=getattr(args, "consistent", False),
        progress=progress,
    )


def spent(cost: Any) -> str:
    reported = "" if cost.consumed is None else f" (DynamoDB reported {cost.consumed:,.1f})"
    return (
        f"read {cost.items_read:,} items in {cost.requests:,} requests: {cost.read_units:,.1f} read "
        f"units by the model{reported}"
    )


def deployed_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--deployed", nargs="?", const="", metavar="STACK",
                     help="run inside the stack, as invocations of its operations function (next to "
                     "the database): the one $OPERATIONS_FUNCTION names, or STACK's output")  # fmt: skip


def operations_function(stack: str) -> str:
    """The operations function: $OPERATIONS_FUNCTION (`source .local/env`), or a stack's output."""
    if not stack:
        return given(None, "OPERATIONS_FUNCTION", "operations function", "--deployed STACK")
    (name,) = stack_output(stack, "OperationsFunctionName")
    if name is None:
        raise SystemExit(
            f"--deployed {stack}: the stack has no OperationsFunctionName output (a pipeline stack's)"
        )
    return name


def stack_output(stack: str, *keys: str) -> list[str | None]:
    """A deployed stack's outputs whose keys start with each of `keys` (CDK may suffix them), None
    where it has none; one DescribeStacks call."""
    from hybridsync.runtime import aws

    outputs = aws.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    return [next((o["OutputValue"] for o in outputs if o["OutputKey"].startswith(k)), None) for k in keys]


def deployed(args: argparse.Namespace, event: dict[str, Any]) -> dict[str, Any]:
    """One invocation of the operations function; its answer (a failure: one line, exit 1)."""
    from hybridsync.runtime import aws
    from hybridsync.sync import operations

    try:
        return operations.deployed(operations_function(args.deployed), aws.client("lambda"))(event)
    except RuntimeError as error:
        raise SystemExit(f"hybridsync {args.command} --deployed: {error}") from None


def cdk_context(root: Path | None = None) -> dict[str, Any]:
    """The context of the project's cdk.json (of `root`, else the project's folder); {} without one."""
    cdk = (root or config.project_root() or Path.cwd()) / "cdk.json"
    return dict(json.loads(cdk.read_text()).get("context", {})) if cdk.is_file() else {}


def project_prefix() -> str:
    """The stacks' prefix of the project's cdk.json (its context `prefix`), else the default."""
    from hybridsync.truth.context import SETTINGS

    return str(cdk_context().get("prefix") or SETTINGS["prefix"].default)
