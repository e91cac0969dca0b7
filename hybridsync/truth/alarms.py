"""Every alarm watches a metric that exists: one AWS publishes so, or one the engine's functions
emit."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hybridsync.truth.facts import CANARY, PAGES, PUBLISHED, PUBLISHED_VALUES, VALUE_PAGES
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Id, Templates, replica_regions


@functools.cache
def engine_metrics() -> frozenset[str]:
    """The metric names the engine's functions emit (Powertools `add_metric` in the shipped modules:
    a literal name, a module constant, or the keys of a dict whose items it emits)."""
    names: set[str] = set()
    root = Path(__file__).resolve().parents[1]
    for path in root.rglob("*.py"):
        if {"local", "cdk", "cli", "testing", "workloads", "truth"} & set(path.relative_to(root).parts):
            continue
        tree = ast.parse(path.read_text())
        constants = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_metric" and node.args
            ):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
            elif isinstance(first, ast.IfExp):
                names |= {b.value for b in (first.body, first.orelse) if isinstance(b, ast.Constant)}
            elif isinstance(first, ast.Name) and first.id in constants:
                names.add(constants[first.id])
            elif isinstance(first, ast.Name):  # `for name, n in emitted.items()`: that dict's keys
                names |= _keys_iterated_as(tree, first.id)
    return frozenset(names)


def _keys_iterated_as(tree: ast.AST, name: str) -> set[str]:
    """The string keys of the dict literal a loop `for name, ... in <dict>.items()` walks."""
    assigned = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)]
    dicts = {t.id: n.value for n in assigned for t in n.targets if isinstance(t, ast.Name)}
    found: set[str] = set()
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For)):
        targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        walked = loop.iter
        if not (any(isinstance(t, ast.Name) and t.id == name for t in targets[:1])
                and isinstance(walked, ast.Call) and isinstance(walked.func, ast.Attribute)
                and walked.func.attr == "items" and isinstance(walked.func.value, ast.Name)):  # fmt: skip
            continue
        literal = dicts.get(walked.func.value.id)
        if literal is not None:
            found |= {
                k.value for k in literal.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
    return found


def _counts_events(templates: Templates, stack: str, mapping: Any) -> bool:
    """Whether the event source mapping a dimension names publishes its event counts."""
    ident = templates.target(stack, mapping)
    resource = templates.get(ident) if ident else None
    if resource is None:
        return True  # a mapping of yours, by its literal UUID: not in the templates to judge
    return "EventCount" in resource["Properties"].get("MetricsConfig", {}).get("Metrics", [])


def _metric_stats(properties: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "MetricName" in properties:
        yield properties
    for query in properties.get("Metrics", []):
        if "MetricStat" in query:
            yield query["MetricStat"]["Metric"]


def _engine_services(templates: Templates) -> set[tuple[str, str]]:
    """(namespace, service) of every function the templates hold (Powertools' variables)."""
    found = set()
    for _, function in templates.resources("AWS::Lambda::Function"):
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "POWERTOOLS_METRICS_NAMESPACE" in variables:
            found.add((variables["POWERTOOLS_METRICS_NAMESPACE"], variables.get("POWERTOOLS_SERVICE_NAME")))
    return found


# A dimension whose value names a resource of the stacks: the resource's type, and what of it the
# value must be (`Ref`, or an attribute): each service's metrics page names the dimension's value (a
# queue's name, not its URL, which is an SQS queue's Ref; a table's name; a proxy's name...)
NAMED_BY: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("AWS/Lambda", "FunctionName"): (("AWS::Lambda::Function",), "Ref"),
    ("AWS/Lambda", "EventSourceMappingUUID"): (("AWS::Lambda::EventSourceMapping",), "Ref"),
    ("AWS/SQS", "QueueName"): (("AWS::SQS::Queue",), "QueueName"),
    ("AWS/ApiGateway", "ApiId"): (("AWS::ApiGatewayV2::Api",), "Ref"),
    ("AWS/RDS", "ProxyName"): (("AWS::RDS::DBProxy",), "Ref"),
    ("AWS/RDS", "DBClusterIdentifier"): (("AWS::RDS::DBCluster",), "Ref"),
    ("AWS/DynamoDB", "TableName"): (("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"), "Ref"),
    ("AWS/Kinesis", "StreamName"): (("AWS::Kinesis::Stream",), "Ref"),
}


def _reference(templates: Templates, stack: str, value: Any) -> tuple[Id, str] | None:
    """The resource a value is a reference to, and how (`Ref`, or the attribute a GetAtt reads),
    through CDK's exports (None: a literal)."""
    if not isinstance(value, dict):
        return None
    if "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
        return (stack, value["Ref"]), "Ref"
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return (stack, logical), attribute
    if "Fn::ImportValue" in value and value["Fn::ImportValue"] in templates.exports:
        return _reference(templates, *templates.exports[value["Fn::ImportValue"]])
    return None


def _wrong_references(templates: Templates, stack: str, namespace: str, dimensions: dict[str, Any]) -> str:
    """What is wrong with the dimensions that name a resource of the stacks (empty: nothing): a
    resource of another type, a reference to something else of it than the metric's name or id, or
    a global secondary index its table does not have."""
    wrong = []
    for dimension, value in sorted(dimensions.items()):
        expected = NAMED_BY.get((namespace, dimension))
        found = _reference(templates, stack, value)
        resource = templates.get(found[0]) if found else None
        if expected is None or found is None or resource is None:
            continue
        kinds, how = expected
        if resource["Type"] not in kinds or found[1] != how:
            named = f"{found[0][0]}/{found[0][1]} ({resource['Type']})"
            wrong.append(f"{dimension} is the {found[1]} of {named}; AWS publishes it with the {how} of "
                         f"an {' or '.join(kinds)}")  # fmt: skip
        elif dimension == "TableName" and isinstance(
            index := dimensions.get("GlobalSecondaryIndexName"), str
        ):
            indexes = {
                i.get("IndexName") for i in resource.get("Properties", {}).get("GlobalSecondaryIndexes", [])
            }
            if index not in indexes:
                wrong.append(
                    f"GlobalSecondaryIndexName={index}: {found[0][0]}/{found[0][1]} has no such index"
                )
        if dimension == "TableName" and isinstance(region := dimensions.get("ReceivingRegion"), str):
            replicas = replica_regions(resource.get("Properties", {}))
            if region not in replicas:  # DynamoDB publishes it for the table's replica Regions alone
                wrong.append(f"ReceivingRegion={region}: {found[0][0]}/{found[0][1]} has no replica there "
                             f"(its replicas: {', '.join(replicas) or 'none'})")  # fmt: skip
    return "; ".join(wrong)


def metric_rules(templates: Templates) -> list[Finding]:
    """Every alarm watches a metric stream that exists: a namespace, metric and dimension set AWS
    publishes, or a metric one of the engine's functions emits with the dimensions it emits it with."""
    findings = []
    services = _engine_services(templates)
    for ident, alarm in templates.resources("AWS::CloudWatch::Alarm"):
        properties, where = alarm["Properties"], f"{ident[0]}/{ident[1]}"
        for metric in _metric_stats(properties):
            namespace, name = metric.get("Namespace", ""), metric.get("MetricName", "")
            dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            names = tuple(sorted(dimensions))
            if namespace.startswith("AWS/"):
                sets = PUBLISHED.get(namespace, {}).get(name)
                if sets is None:
                    message = f"{namespace} {name} is not a metric this app's table knows AWS to publish"
                elif names not in [tuple(sorted(s)) for s in sets]:
                    shown = " | ".join(", ".join(s) for s in sets)
                    message = (
                        f"{namespace} {name} is published with [{shown}], never with [{', '.join(names)}]"
                    )
                elif "EventSourceMappingUUID" in dimensions and not _counts_events(
                    templates, ident[0], dimensions["EventSourceMappingUUID"]
                ):
                    message = (
                        f"{namespace} {name}: its mapping has no MetricsConfig EventCount, without which "
                        "Lambda publishes no metric of the mapping"
                    )
                    findings.append(Finding("alarm-metric", where, message, PAGES["mapping-metrics"]))
                    continue
                elif wrong_reference := _wrong_references(templates, ident[0], namespace, dimensions):
                    message = f"{namespace} {name}: {wrong_reference}"
                elif wrong := sorted(
                    (d, v)
                    for d, v in dimensions.items()
                    if isinstance(v, str) and v not in PUBLISHED_VALUES.get((namespace, d), {v})
                ):
                    shown = ", ".join(
                        f"{d}={v} (AWS's values: {', '.join(sorted(PUBLISHED_VALUES[(namespace, d)]))})"
                        for d, v in wrong
                    )
                    pages = [VALUE_PAGES[(namespace, d)] for d, _ in wrong if (namespace, d) in VALUE_PAGES]
                    message = f"{namespace} {name} is never published with {shown}"
                    findings.append(Finding("alarm-metric", where, message, PAGES[(pages or ["metrics"])[0]]))
                    continue
                else:
                    continue
                findings.append(Finding("alarm-metric", where, message, PAGES["metrics"]))
                continue
            service = dimensions.get("service")
            if name == CANARY and ident[1].startswith(CANARY):
                continue
            emitted = name in engine_metrics() and names == ("service",) and (namespace, service) in services
            if not emitted:
                findings.append(
                    Finding(
                        "alarm-metric",
                        where,
                        f"{namespace} {name} {dimensions}: no function "
                        "of the engine emits it so (namespace, `service` dimension)",
                        PAGES["metrics"],
                    )
                )
    return findings
