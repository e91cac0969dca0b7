"""The check engine of `hybridsync doctor` (the command is `hybridsync.cli.doctor`): what the
templates say each function needs (`inventory`), where the app runs (`targets`: the deployed stacks
or the local app), and the checks run there, one verdict each (`checks`)."""

from hybridsync.truth.doctor.checks import (
    FAILED,
    SUCCEEDED,
    TRANSITIONS,
    Network,
    canary,
    judge_probe,
    mappings,
    probe_event,
    probes,
    proxies,
    report,
    run_checks,
    topics,
    vpcs,
)
from hybridsync.truth.doctor.inventory import STACKS, App, Check, Topic
from hybridsync.truth.doctor.targets import (
    INVOKE_TIMEOUT_S,
    Deployed,
    Local,
    ProbeFailed,
    Target,
    invoke_probe,
)

__all__ = [
    "FAILED",
    "INVOKE_TIMEOUT_S",
    "STACKS",
    "SUCCEEDED",
    "TRANSITIONS",
    "App",
    "Check",
    "Deployed",
    "Local",
    "Network",
    "ProbeFailed",
    "Target",
    "Topic",
    "canary",
    "invoke_probe",
    "judge_probe",
    "mappings",
    "probe_event",
    "probes",
    "proxies",
    "report",
    "run_checks",
    "topics",
    "vpcs",
]
