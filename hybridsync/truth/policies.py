"""IAM policy reading the rules share: what an Allow grants, and which Deny may refuse a call
(IAM's policy evaluation logic)."""

from __future__ import annotations

import json
import re
from typing import Any

from hybridsync.truth.templates import Id, Templates, listed


def allows(statements: list[tuple[str, dict[str, Any]]], action: str) -> bool:
    """Whether an Allow statement grants `action` (wildcards honoured)."""
    return any(
        statement.get("Effect") == "Allow"
        and any(re.fullmatch(a.replace("*", ".*"), action, re.I) for a in listed(statement.get("Action")))
        for _, statement in statements
    )


def _names_action(statement: dict[str, Any], action: str) -> bool:
    """Whether a statement is about `action`: its Action matches it, or its NotAction does not."""

    def matches(patterns: Any) -> bool:
        return any(
            re.fullmatch(re.escape(str(p)).replace(r"\*", ".*").replace(r"\?", "."), action, re.I)
            for p in listed(patterns)
        )

    if "NotAction" in statement:
        return not matches(statement["NotAction"])
    return matches(statement.get("Action"))


# Conditions a Deny may carry that the callers these rules judge never meet: every AWS SDK and
# service principal calls over TLS (`aws:SecureTransport` true: CDK's `enforce_ssl`), and a Deny of
# *other* accounts' or sources' calls (the negated operators on aws:SourceAccount / aws:SourceArn,
# the confused-deputy guard) leaves the stacks' own alarms alone.
_NEGATED = ("StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike")
_ACCOUNT_KEYS = {"aws:sourceaccount", "aws:sourceowner"}  # CloudWatch sends both to SNS


def _condition_spares(condition: Any) -> bool:
    """Whether a Deny's condition can be shown never to hold for the stacks' own calls (any other
    condition may hold: the Deny counts)."""
    if not isinstance(condition, dict) or not condition:
        return False
    for operator, keys in condition.items():
        if not isinstance(keys, dict):
            return False
        for key, value in keys.items():
            secure = operator == "Bool" and key.lower() == "aws:securetransport"
            if secure and [str(v).lower() for v in listed(value)] == ["false"]:
                return True
            # a negated test of the source spares the stacks' own calls only when it names their own
            # account: with any other value, or a key the call lacks, it holds ("the condition is
            # true" when the key is absent: IAM condition operators)
            own = all(v == {"Ref": "AWS::AccountId"} for v in listed(value))
            if operator in _NEGATED and key.lower() in _ACCOUNT_KEYS and own:
                return True
    return False


def _principal_covers(statement: dict[str, Any], service: str | None) -> bool:
    """Whether a resource policy's statement applies to `service`'s principal (None: an identity
    policy's statement, which has none and applies to its role)."""
    if service is not None and "NotPrincipal" in statement:  # every principal it does not name
        excluded = statement["NotPrincipal"]
        return excluded != "*" and not (
            isinstance(excluded, dict) and service in listed(excluded.get("Service"))
        )
    if service is None or "Principal" not in statement:
        return "NotPrincipal" not in statement
    principal = statement["Principal"]
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False
    return "*" in listed(principal.get("AWS")) or service in listed(principal.get("Service"))


def denials(
    statements: list[tuple[str, dict[str, Any]]],
    action: str,
    service: str | None = None,
    covers: Any = lambda _stack, _resource: True,
) -> list[dict[str, Any]]:
    """The Deny statements that may refuse `action` (to `service`'s principal, on a resource
    `covers(stack, Resource)` says they name): an explicit deny overrides every allow (IAM's policy
    evaluation logic), and a condition counts unless it can be shown never to hold."""
    return [
        statement
        for stack, statement in statements
        if statement.get("Effect") == "Deny"
        and _names_action(statement, action)
        and _principal_covers(statement, service)
        and ("Resource" not in statement or covers(stack, statement["Resource"]))
        and not _condition_spares(statement.get("Condition"))
    ]  # fmt: skip


def may_name(templates: Templates, stack: str, named: Any, *, resource: Id) -> bool:
    """Whether a statement's Resource may name `resource`: `*`, a reference to it, or a literal
    pattern (an ARN this module cannot resolve is taken to name it)."""
    items = listed(named)
    if "*" in items or resource in templates.mentions(stack, named):
        return True
    return any(isinstance(item, str) for item in items)


def described(statements: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"Sid {s['Sid']}" if s.get("Sid") else json.dumps(s.get("Condition") or s.get("Action"))[:80]
        for s in statements
    )


def principal_services(statement: dict[str, Any]) -> set[str]:
    principal = statement.get("Principal", {})
    return set(listed(principal.get("Service"))) if isinstance(principal, dict) else set()
