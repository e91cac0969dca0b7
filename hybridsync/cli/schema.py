"""Migrations: the PostgreSQL schema in two Alembic branches, the engine's and the project's."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hybridsync.cli import common
from hybridsync.cli.common import Commands
from hybridsync.sql import migrations


def add_migrations(cli: Commands) -> None:
    migrate = cli.add(
        "migrations",
        "the PostgreSQL schema (Alembic, two branches: the engine's and the "
        "project's): upgrade, downgrade, current; generate the project's next revision from "
        "its model (outbox triggers included); check a database against the model (exit 1 "
        "if it differs)",
        'hybridsync migrations generate -m "add invoices"',
        _migrations,
    )
    migrate.add_argument("action", choices=["upgrade", "downgrade", "current", "generate", "check"])
    migrate.add_argument("revision", nargs="?", help="target revision (default heads for upgrade)")
    migrate.add_argument("-m", "--message", help="generate: what the revision does")
    migrate.add_argument(
        "--url",
        help="PostgreSQL URL (default $DATABASE_URL; generate and check without "
        "one use a throw-away embedded PostgreSQL at the revisions' heads)",
    )
    common.deployed_option(migrate)  # upgrade and current, next to the deployed database
    cli.subparsers._name_parser_map["db"] = migrate  # the command's old name


def _migrations(args: argparse.Namespace) -> int:
    if args.deployed is not None:
        if args.action not in ("upgrade", "current") or args.revision:
            raise SystemExit("--deployed runs `upgrade` (to the heads) and `current`")
        answer = common.deployed(args, {"operation": "migrations", "action": args.action})
        print(f"schema at revision {answer['revision']}")
        return 0
    if args.action in ("generate", "check") and not (args.url or os.environ.get("DATABASE_URL")):
        return _on_scratch_database(args)  # no database named: a throw-away one at the revisions' heads
    url = common.database_url(args)
    if args.action == "upgrade":
        migrations.upgrade(url, args.revision or "heads")
    elif args.action == "downgrade":
        if not args.revision:
            raise SystemExit("downgrade needs a revision, e.g. `hybridsync migrations downgrade base`")
        migrations.downgrade(url, args.revision)
    elif args.action == "generate":
        return _generate(url, args.message)
    elif args.action == "check":
        return _check(url)
    print(f"schema at revision {migrations.current_revision(url)}")
    return 0


def _on_scratch_database(args: argparse.Namespace) -> int:
    import tempfile

    from hybridsync import local

    with tempfile.TemporaryDirectory(prefix="hybridsync-migrations-") as folder:
        url, stop = local.start_postgres(Path(folder) / "postgres")
        try:
            if args.action == "check":
                migrations.upgrade(url)  # what the revisions build, compared with the model
            return _generate(url, args.message) if args.action == "generate" else _check(url)
        finally:
            stop()


def _generate(url: str, message: str | None) -> int:
    if not message:
        raise SystemExit('generate needs a message: hybridsync migrations generate -m "add invoices"')
    written = migrations.generate(url, message)
    print(
        f"wrote {written}"
        if written
        else "the database at the revisions' heads already matches the model: no revision written"
    )
    return 0


def _check(url: str) -> int:
    differences = migrations.check(url)
    for line in differences.lines():
        print(line)
    print(
        "the database differs from the model: `hybridsync migrations generate -m ...`, then upgrade"
        if differences
        else "the database matches the model (tables, columns, types and triggers)"
    )
    return 1 if differences else 0
