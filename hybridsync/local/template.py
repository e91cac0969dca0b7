"""The synthesized cloud assembly (`cdk.out`), read as the local app's only description of itself:
tables, functions, event source mappings, queues, HTTP routes, schedules and alarms, with the
intrinsic functions CDK emits (Ref, Fn::GetAtt, Fn::ImportValue, Fn::Join, Fn::Sub, Fn::Select,
Fn::Split) resolved to local values."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybridsync.model.errors import ConfigurationError
from hybridsync.truth.facts import STANDBY

ENGINE = Path(__file__).resolve().parents[1]
ACCOUNT = "123456789012"  # the account the local app says it runs in (AWS documentation's example)
CLI_CONTEXT = {"aws:cdk:enable-path-metadata": True, "aws:cdk:enable-asset-metadata": True,
               "aws:cdk:version-reporting": False, "aws:cdk:bundling-stacks": ["**"]}  # fmt: skip


class TemplateError(ConfigurationError):
    """The synthesized app says something the local app cannot run (or is missing)."""


def _sources(root: Path) -> list[Path]:
    """What a synthesized app is made from: the project's settings, its model's package, the engine."""
    from hybridsync.model import config

    return [root / "pyproject.toml", root / "cdk.json", root / "app.py", config.package_dir(), ENGINE]


def synth_if_stale(assembly: Path, *, synth: bool = True) -> Path:
    """Synthesize the project's CDK app into `assembly` when it is missing or older than its sources.
    Runs cdk.json's app command as the CDK CLI would (its context, `CDK_OUTDIR`), without the CLI."""
    from hybridsync.model import config

    root = config.project_root() or Path.cwd()
    manifest = assembly / "manifest.json"
    if manifest.is_file():
        newest = max((p.stat().st_mtime for s in _sources(root) for p in [s, *s.rglob("*.py")] if p.exists()),
                     default=0.0)  # fmt: skip
        if not synth or manifest.stat().st_mtime >= newest:
            return assembly
    if not synth:
        raise TemplateError(f"no synthesized app in {assembly}: drop --no-synth, or run `cdk synth`")
    try:
        settings = json.loads((root / "cdk.json").read_text())
    except (OSError, ValueError) as error:
        raise TemplateError(f"{root / 'cdk.json'}: {error}") from None
    command = shlex.split(settings.get("app", "python3 app.py"))
    if command and Path(command[0]).name.startswith("python"):
        command[0] = sys.executable  # this environment's Python, whatever cdk.json calls it
    # what the CDK CLI adds to every synth: construct paths and asset folders in the metadata
    context = json.dumps(local_context(settings))
    env = os.environ | {"CDK_OUTDIR": str(assembly.resolve()), "CDK_CONTEXT_JSON": context}
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if result.returncode:
        raise TemplateError(f"cdk synth failed:\n{result.stderr[-4000:]}")
    return assembly


def local_context(settings: dict[str, Any]) -> dict[str, Any]:
    """The context the local app synthesizes with: cdk.json's, as the CDK CLI passes it, without
    the standby stacks: they are the deployed app's (and a deployed failover's active standby would
    render home's pipeline disabled)."""
    return CLI_CONTEXT | {k: v for k, v in settings.get("context", {}).items() if k != "standby"}


@dataclass(frozen=True)
class Resource:
    stack: str
    logical_id: str
    type: str
    properties: dict[str, Any]
    metadata: dict[str, Any]

    @property
    def path(self) -> str:
        """The construct path (`HybridSync-pipeline/WriteBack/Function/Resource`)."""
        return str(self.metadata.get("aws:cdk:path", f"{self.stack}/{self.logical_id}"))

    @property
    def construct(self) -> str:
        """The construct's own id in its stack (`WriteBack`, `MainTable`, `WriteBackFailures`)."""
        return self.path.split("/")[1]


@dataclass
class Assembly:
    """Every stack template of a cloud assembly, and the local value of each resource."""

    directory: Path
    templates: dict[str, dict[str, Any]]
    region: str = "us-east-1"
    # (stack, logical id) -> {"Ref": ..., attribute: ...}: filled in as the local app creates things
    values: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path, region: str | None = None) -> Assembly:
        """The assembly in `directory`, run in `region`: by default the one its stacks are pinned
        to (a key's or the home Region of replicas: `aws://<account>/<region>`), else us-east-1."""
        manifest = json.loads((directory / "manifest.json").read_text())
        stacks = {n: a for n, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
        templates = {
            name: json.loads((directory / artifact["properties"]["templateFile"]).read_text())
            for name, artifact in stacks.items()
        }
        # a standby's consumers wait in another Region for a deployed failover; locally, the failover
        # runs home's own functions on the new home's replica (local/failover.py)
        standby = {n for n, t in templates.items() if STANDBY in t.get("Metadata", {})}
        templates = {n: t for n, t in templates.items() if n not in standby}
        stacks = {n: a for n, a in stacks.items() if n not in standby}
        if not templates:
            raise TemplateError(f"no stacks in {directory}")
        pinned = {str(a.get("environment", "")).rsplit("/", 1)[-1] for a in stacks.values()}
        pinned.discard("unknown-region")
        return cls(directory, templates, region or (pinned.pop() if len(pinned) == 1 else "us-east-1"))

    def resources(self, type_: str) -> Iterator[Resource]:
        for stack, template in self.templates.items():
            for logical_id, resource in template.get("Resources", {}).items():
                if resource["Type"] == type_:
                    yield Resource(stack, logical_id, type_, resource.get("Properties", {}),
                                   resource.get("Metadata", {}))  # fmt: skip

    def set(self, resource: Resource, **values: Any) -> None:
        self.values.setdefault((resource.stack, resource.logical_id), {}).update(values)

    def resolve(self, stack: str, value: Any) -> Any:
        """A property value with its intrinsic functions resolved (None where nothing local stands
        for it, e.g. the Aurora cluster the embedded PostgreSQL replaces)."""
        if isinstance(value, list):
            return [self.resolve(stack, v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
            return {k: self.resolve(stack, v) for k, v in value.items()}
        ((name, arg),) = value.items()
        if name == "Ref":
            return self._pseudo(stack, arg) if arg.startswith("AWS::") else self._value(stack, arg, "Ref")
        if name == "Fn::GetAtt":
            logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return self._value(stack, logical_id, attribute)
        if name == "Fn::ImportValue":
            return self._export(self.resolve(stack, arg))
        if name == "Fn::Join":
            separator, parts = arg
            parts = self.resolve(stack, parts)
            return None if any(p is None for p in parts) else separator.join(str(p) for p in parts)
        if name == "Fn::Select":
            index, items = self.resolve(stack, arg)
            return None if items is None else items[int(index)]
        if name == "Fn::Split":
            separator, text = self.resolve(stack, arg)
            return None if text is None else str(text).split(separator)
        if name == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(stack, arg[1]))
            return re.sub(
                r"\$\{([^}]+)\}", lambda m: str(variables.get(m[1]) or self._sub(stack, m[1])), text
            )
        raise TemplateError(f"{stack}: intrinsic {name} is not resolved locally")

    def _sub(self, stack: str, name: str) -> Any:
        if name.startswith("AWS::"):
            return self._pseudo(stack, name)
        logical_id, _, attribute = name.partition(".")
        return self._value(stack, logical_id, attribute or "Ref")

    def _pseudo(self, stack: str, name: str) -> str:
        return {"AWS::Region": self.region, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
                "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": stack}[name]  # fmt: skip

    def _value(self, stack: str, logical_id: str, attribute: str) -> Any:
        return self.values.get((stack, logical_id), {}).get(attribute)

    def _export(self, name: str) -> Any:
        for stack, template in self.templates.items():
            for output in template.get("Outputs", {}).values():
                if output.get("Export", {}).get("Name") == name:
                    return self.resolve(stack, output["Value"])
        raise TemplateError(f"no stack exports {name!r}")

    def function_of(self, stack: str, reference: Any) -> Resource:
        """The AWS::Lambda::Function a property names (by Ref, ARN or an import of either, qualified by
        an alias or not: `Name:live`, `arn:...:function:Name:live`)."""
        resolved = self.resolve(stack, reference)
        if isinstance(resolved, str):
            parts = resolved.split(":")
            if (resolved.startswith("arn:") and len(parts) == 8) or (
                not resolved.startswith("arn:") and len(parts) == 2
            ):
                resolved = ":".join(parts[:-1])
        for function in self.resources("AWS::Lambda::Function"):
            local = self.values.get((function.stack, function.logical_id), {})
            if resolved is not None and resolved in (local.get("Ref"), local.get("Arn")):
                return function
        raise TemplateError(f"{stack}: {reference!r} names no function of the app")
