"""EventBridge schedules, locally: each enabled rate rule of the templates (the outbox drain's, the
sweep's) invoking its functions asynchronously, as EventBridge does."""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from datetime import UTC, datetime

from hybridsync import truth as rules
from hybridsync.local.account import Account
from hybridsync.local.awslambda.functions import LocalFunction
from hybridsync.local.awslambda.service import LambdaFunctions
from hybridsync.local.template import ACCOUNT, Resource

log = logging.getLogger(__name__)
RATE = rules.RATE  # an EventBridge rate expression


class Schedules:
    """The app's schedules, run until the account stops."""

    def __init__(self, account: Account, lambdas: LambdaFunctions) -> None:
        self.account, self.lambdas = account, lambdas

    def start(self, only: set[str] | None = None) -> None:
        for rule in self.account.assembly.resources("AWS::Events::Rule"):
            expression = rule.properties.get("ScheduleExpression", "")
            matched = RATE.fullmatch(expression)  # a disabled rule (pipeline_enabled=false) never runs
            if not matched or rule.properties.get("State", "ENABLED") != "ENABLED":
                if expression:
                    log.warning("%s: schedule %r does not run locally", rule.path, expression)
                continue
            unit = {"minute": 60, "hour": 3600, "day": 86400}[matched[2].rstrip("s")]
            targets = [
                self.account.assembly.function_of(rule.stack, t["Arn"]) for t in rule.properties["Targets"]
            ]
            functions = [self.account.functions[t.construct] for t in targets]
            if only is not None and not only & {f.name for f in functions}:
                continue
            every = int(matched[1]) * unit
            self.account.spawn(self._every, every, functions, rule, name=f"schedule-{rule.construct}")

    def _every(self, seconds: int, functions: list[LocalFunction], rule: Resource) -> None:
        """A rate schedule: its first run at once (EventBridge runs a new rule's first within its
        period), then one every period, whatever a run lasts: each invocation is asynchronous,
        its own thread ("All schedule types on EventBridge Scheduler invoke their targets with 60
        second precision": the local clock is exact, which no test may rely on)."""
        ticks = itertools.count()
        started = time.monotonic()
        while not self.account.stopping.wait(max(0.0, started + next(ticks) * seconds - time.monotonic())):
            arn = f"arn:aws:events:{self.account.region}:{ACCOUNT}:rule/{rule.construct}"
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": "Scheduled Event",
                "source": "aws.events",
                "account": ACCOUNT,
                "region": self.account.region,
                "detail": {},
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "resources": [arn],
            }
            for function in functions:  # EventBridge invokes asynchronously
                threading.Thread(target=self.lambdas.invoke_async, args=(function, event), daemon=True,
                                 name=f"{rule.construct}-run").start()  # fmt: skip
