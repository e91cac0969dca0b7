"""`hybridsync check ASSEMBLY_DIR`: the deploy truth (`hybridsync.truth`, what every `cdk synth`
of a hybridsync app checks) run on any synthesized cloud assembly: a team's CI that synthesizes its
own `cdk.out`, an assembly changed by hand or by a test. No AWS call, no Node: the templates alone.
One line per finding (`[rule] stack/resource: what breaks (AWS's page)`), exit 1 on any; exit 2 when
the folder holds no assembly to check."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from hybridsync.cli.common import Commands

UNUSABLE = 2  # as argparse's usage errors: nothing was checked


def assemblies(directory: Path) -> list[Path]:
    """The folders of stack templates to check, each on its own: the assembly, and each nested one
    (a CDK Stage's `assembly-<name>`, where its stacks' templates are)."""
    found = [directory] if any(directory.glob("*.template.json")) else []
    nested = sorted(p for p in directory.rglob("assembly-*") if p.is_dir() and any(p.glob("*.template.json")))
    return found + nested


def findings_of(directory: Path) -> tuple[list[Any], int]:
    """Every finding of every rule on each assembly of `directory` (a nested one's resources named
    `<its folder>:<stack>/<id>`), and how many stacks were read. ValueError: a template that is not
    JSON; a rule that cannot read a template says which."""
    from hybridsync import truth

    findings, stacks = [], 0
    for folder in assemblies(directory):
        try:
            templates = truth.Templates.load(folder)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"a template in {folder} is not JSON ({error})") from None
        stacks += len(templates.templates)
        where = "" if folder == directory else f"{folder.relative_to(directory)}:"
        for rule in truth.RULES:
            try:
                found = rule(templates)
            except (KeyError, TypeError, AttributeError, IndexError, ValueError) as error:
                raise ValueError(
                    f"rule {rule.__name__} could not read the templates of {folder} "
                    f"({type(error).__name__}: {error}): are they CloudFormation templates?"
                ) from None
            findings += [dataclasses.replace(f, resource=where + f.resource) for f in found]
    return findings, stacks


def _check(args: argparse.Namespace) -> int:
    directory = Path(args.assembly)
    problem = None
    if not directory.exists():
        problem = f"no folder {directory}: give the folder `npx cdk synth` writes (cdk.out, or its --output)"
    elif not directory.is_dir():
        problem = f"{directory} is a file: give the folder `npx cdk synth` writes (cdk.out, or its --output)"
    elif not assemblies(directory):
        problem = (
            f"{directory} holds no stack template (*.template.json): is it a cloud assembly, the folder "
            "`npx cdk synth` writes?"
        )
    if problem is None:
        try:
            findings, stacks = findings_of(directory)
        except ValueError as error:
            problem = str(error)
    if problem is not None:
        print(f"hybridsync check: {problem}", file=sys.stderr)
        return UNUSABLE
    if args.json:
        print(json.dumps({"assembly": str(directory), "stacks": stacks, "ok": not findings,
                          "findings": [dataclasses.asdict(f) for f in findings]}, indent=2))  # fmt: skip
    else:
        for finding in findings:
            print(finding)
        summary = f"{len(findings)} finding(s) in {stacks} stack(s) of {directory}"
        print(f"hybridsync check: {summary}", file=sys.stderr)
    return 1 if findings else 0


def add_check(cli: Commands) -> None:
    check = cli.add(
        "check",
        "run the deploy rules every synth runs (hybridsync.truth: topic and key policies, alarm metrics, "
        "routes out of the VPC, KMS actions, database trust, rotation order, stream readers, freshness) on "
        "a synthesized cloud assembly, without AWS or Node: one line per finding naming its rule, resource "
        "and AWS page, exit 1 on any (2: no assembly to check)",
        "hybridsync check cdk.out   (in CI, after `npx cdk synth`; --json for a machine)",
        _check,
    )
    check.add_argument(
        "assembly", metavar="ASSEMBLY_DIR", help="the folder `cdk synth` wrote (cdk.out, or its --output)"
    )
    check.add_argument(
        "--json", action="store_true", help="the findings as JSON ({assembly, stacks, ok, findings})"
    )
