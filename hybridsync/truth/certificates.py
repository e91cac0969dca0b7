"""The CA a database presents: each connection trusts it."""

from __future__ import annotations

from hybridsync.truth.facts import PAGES
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Templates


def trust_rules(templates: Templates) -> list[Finding]:
    """Each database connection trusts the CA its server presents: RDS Proxy's certificates chain to
    Amazon Root CA (certifi's roots, the default); an instance's or cluster's to the RDS CA, which a
    direct connection must be given (`-c db_root_certificates=`)."""
    findings = []
    for ident, function in templates.resources("AWS::Lambda::Function"):
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "DB_ROLE" not in variables:
            continue
        through_proxy = variables.get("DB_IAM_AUTH") == "true" and any(
            (templates.get(t) or {}).get("Type") == "AWS::RDS::DBProxy"
            for t in templates.mentions(ident[0], variables.get("DB_HOST"))
        )
        if not through_proxy and not variables.get("DB_SSLROOTCERT"):
            findings.append(
                Finding(
                    "database-trust",
                    f"{ident[0]}/{ident[1]}",
                    "connects straight to the "
                    "database with verify-full against certifi's roots, which hold no RDS CA: "
                    "ship the RDS bundle (-c db_root_certificates=) or connect through the proxy",
                    PAGES["rds-tls"],
                )
            )
    return findings
