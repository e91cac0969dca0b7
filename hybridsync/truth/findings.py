"""What a rule says of a template (a Finding), and the error a synth refusing them raises."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    rule: str
    resource: str  # <stack>/<logical id>
    message: str
    source: str  # the AWS page the fact comes from

    def __str__(self) -> str:
        return f"[{self.rule}] {self.resource}: {self.message} ({self.source})"


class DeployTruthError(ValueError):
    """A synthesized template breaks a fact of AWS's: it would fail in AWS."""

    def __init__(self, findings: list[Finding]):
        super().__init__(
            f"{len(findings)} finding(s) against AWS's documented behaviour:\n"
            + "\n".join(f"  {f}" for f in findings)
        )
        self.findings = findings
