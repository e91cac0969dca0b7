"""The `hybridsync` command line: start a project, run its app locally, migrate its schema, check
both sides, and read what the model declares. Every command serves the project's model (see
`hybridsync.model.config`)."""

from __future__ import annotations

import argparse
import io
import os
import sys

from hybridsync import __version__
from hybridsync.cli import (
    adopt,
    check,
    costs,
    doctor,
    failover,
    local,
    operations,
    reads,
    schema,
    standby,
    trace,
)
from hybridsync.cli.common import Commands, Parser, unreachable

# `hybridsync --help` lists them in this order
COMMANDS = (
    local.add_init, local.add_up, local.add_status, doctor.add_doctor, check.add_check, costs.add_plan,
    trace.add_trace, local.add_invoke, failover.add_failover, standby.add_standby, schema.add_migrations,
    adopt.add_load,
    adopt.add_aggregates, adopt.add_jobs, operations.add_reconcile, operations.add_reindex,
    reads.add_distinct_keys, costs.add_cost, operations.add_timeseries, operations.add_dead_letters,
    operations.add_failed_batches, operations.add_dashboard, reads.add_top, reads.add_model,
    reads.add_openapi,
)  # fmt: skip


def parser() -> argparse.ArgumentParser:
    top = Parser(  # argparse's, which also says "did you mean --once?"
        prog="hybridsync",
        description=__doc__,
        epilog="example: hybridsync up   (then, in another shell: source .local/env && hybridsync reconcile)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"hybridsync {__version__}")
    cli = Commands(top.add_subparsers(dest="command", required=True))
    for add in COMMANDS:
        add(cli)
    # one word in the usage line (a list of every command overflows a terminal and the docs'
    # column); each command is listed under it, not its old names kept working (`db`: `migrations`)
    cli.subparsers.metavar = "COMMAND"
    return top


def main(argv: list[str] | None = None) -> int:
    from botocore.exceptions import NoRegionError

    from hybridsync.model.errors import ConfigurationError

    args = parser().parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a stored item's lone surrogate is shown escaped, not a crash
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        return args.run(args)
    except ConfigurationError as error:  # what the user can fix: one clear line, no traceback
        raise SystemExit(f"hybridsync {args.command}: {error}") from None
    except NoRegionError:
        raise SystemExit(
            f"hybridsync {args.command}: no AWS region: set AWS_REGION, or `source .local/env` "
            "for the local app"
        ) from None
    except BrokenPipeError:  # `hybridsync status | head`: the reader left; end quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own advice (signal docs)
        return 1
    except Exception as error:  # an endpoint that does not answer (the local app stopped): one line
        if (line := unreachable(error)) is None:
            raise
        raise SystemExit(f"hybridsync {args.command}: {line}") from None


if __name__ == "__main__":
    sys.exit(main())
