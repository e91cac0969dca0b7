"""`hybridsync doctor`: what the app needs to work, checked where it runs (the deployed stacks, or the
local app of `hybridsync up`), one line per check: from inside each VPC function (its probe,
hybridsync/runtime/doctor.py) every service it needs, each secret it reads and its database login; the RDS
Proxy's targets; every stream mapping enabled, or paused on purpose; every alarm's topic heard by
a confirmed subscription; and a canary alarm driven to ALARM and back, whose history must show
CloudWatch's "Successfully executed action". What to check comes from the synthesized templates
(`hybridsync.truth`), the same ones the stacks were deployed from. The checks are the deploy truth's
(`hybridsync.truth.doctor`); this module is the command."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from hybridsync import truth
from hybridsync.cli.common import Commands, project_prefix
from hybridsync.truth.doctor import App, Deployed, Local, report, run_checks


def add_doctor(cli: Commands) -> None:
    doctor = cli.add(
        "doctor",
        "check what the app needs, where it runs (one line per check, exit 1 on any failure): from inside "
        "each VPC function every service it needs, each secret it reads and its database login; the RDS "
        "Proxy's targets; every stream mapping enabled or paused on purpose; each replica ACTIVE and "
        "replicating within a minute; every alarm's topic heard by "
        "a confirmed subscription; a canary alarm driven to ALARM and back, its notification sent. "
        "Without --deployed: the local app of `hybridsync up`",
        "hybridsync doctor --deployed   (the first command after `cdk deploy`; locally: hybridsync doctor)",
        _doctor,
    )
    doctor.add_argument(
        "--deployed",
        nargs="?",
        const="",
        metavar="PREFIX",
        help="check the deployed stacks PREFIX-data, -database, -pipeline, -api, -monitoring "
        "(default PREFIX: cdk.json's context `prefix`) with the caller's AWS credentials",
    )
    doctor.add_argument("--json", action="store_true", help="every check as JSON ({where, ok, checks})")
    doctor.add_argument(
        "--canary-wait",
        type=float,
        default=60,
        metavar="S",
        help="how long the canary's notification may take (default 60 s)",
    )
    doctor.add_argument(
        "--no-canary",
        action="store_true",
        help="skip the canary (it sends one ALARM and one OK notification to the subscribers)",
    )
    doctor.add_argument("--state-dir", default=".local", help="the local app's state (default .local)")
    doctor.add_argument("--prefix", default="hybridsync", help="the local app's prefix (default hybridsync)")
    doctor.add_argument(
        "--assembly", default="cdk.out", help="the synthesized app `up` runs (default cdk.out)"
    )


def _fenced(templates: dict[str, Any], pipeline: str) -> None:
    """Since a deployed failover (cdk.json's active standby), home's mappings are judged as the next
    deploy renders them, disabled: never "enable it" for a fenced home."""
    from hybridsync.cli.standby import standbys
    from hybridsync.model import config

    active = [r for r, e in standbys(config.project_root() or Path.cwd()).items() if e.get("active")]
    if not active or pipeline not in templates:
        return
    print(f"{active[0]} consumes since a deployed failover (cdk.json): {pipeline}'s mappings should be "
          "disabled; its stack there is not checked yet")  # fmt: skip
    for resource in templates[pipeline].get("Resources", {}).values():
        if resource.get("Type") == "AWS::Lambda::EventSourceMapping":
            resource.setdefault("Properties", {})["Enabled"] = False


def local_environment(state_dir: Path) -> dict[str, str]:
    """The variables `hybridsync up` wrote for other shells (`.local/env`)."""
    path = state_dir / "env"
    if not path.is_file():
        raise SystemExit(
            f"hybridsync doctor: no {path}: is `hybridsync up` running (with --state-dir "
            f"{state_dir})? For the deployed stacks: hybridsync doctor --deployed"
        )
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def _doctor(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from hybridsync.runtime import aws
    from hybridsync.runtime import doctor as probe

    target: Any
    if args.deployed is not None:
        prefix = args.deployed or project_prefix()
        try:
            target = Deployed(prefix, aws.client)
        except (BotoCoreError, ClientError) as error:
            raise SystemExit(
                f"hybridsync doctor --deployed {prefix}: {error} (deployed? the right account and region?)"
            ) from None
        _fenced(target.templates, f"{prefix}-pipeline")
        app = App(truth.Templates(target.templates))
    else:
        from hybridsync.local.template import synth_if_stale

        env = local_environment(Path(args.state_dir))
        if not env.get("LAMBDA_ENDPOINT"):
            raise SystemExit(f"hybridsync doctor: {args.state_dir}/env names no LAMBDA_ENDPOINT")
        try:  # one call first: a stopped app is one line, not a failure per check
            probe.client("lambda", env["LAMBDA_ENDPOINT"]).list_event_source_mappings()
        except BotoCoreError as error:
            raise SystemExit(
                f"hybridsync doctor: the local app's Lambda API ({env['LAMBDA_ENDPOINT']}) does not answer "
                f"({error}): is `hybridsync up` running (with --state-dir {args.state_dir})?"
            ) from None
        app = App(truth.Templates.load(synth_if_stale(Path(args.assembly), synth=False)))
        target = Local(app, env["LAMBDA_ENDPOINT"], args.prefix, Path(args.state_dir) / "notifications")
    checks = run_checks(
        app, target, truth.network, canary_wait_s=args.canary_wait, with_canary=not args.no_canary
    )
    return report(checks, args.json, target.where)
