"""Faults injected into the local app's stream deliveries, seeded so a run can be repeated: what
Lambda may do to a batch under at-least-once delivery, on purpose and often.

  duplicate     the batch is delivered again after it succeeded (a retried poll, a lost ack)
  fail_before   the invocation fails before the function runs (an init error, a throttle)
  fail_after    the function runs to the end, then the invocation is reported failed (a timeout
                after the work was done): the platform retries what was already applied

  throttle      a function's DynamoDB request answered with a throttle (400) before it is sent
  server_error  ... with an InternalServerError (500): the SDK's retries must absorb both

The first three are probabilities per invocation, the last two per DynamoDB request (injected in
the function's worker, `bootstrap.py`). `./scripts/up --faults duplicate=0.2,throttle=0.05` runs
the app with them; the mapping's own retries, bisection and failure queue do the rest.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from hybridsync.local.functions import FunctionError


@dataclass(frozen=True)
class FaultPlan:
    seed: int = 7
    duplicate: float = 0.0
    fail_before: float = 0.0
    fail_after: float = 0.0
    throttle: float = 0.0
    server_error: float = 0.0

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        """`duplicate=0.2,fail_after=0.05,seed=3` (any subset)."""
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, raw = part.partition("=")
            if name not in known:
                raise ValueError(f"unknown fault {name!r}; faults are {', '.join(known)}")
            try:
                values[name] = int(raw) if name == "seed" else float(raw)
            except ValueError:
                raise ValueError(f"fault {name} needs a number, got {raw!r}") from None
            if name != "seed" and not 0 <= values[name] <= 1:
                raise ValueError(f"fault {name} is a probability from 0 to 1, got {raw}")
        return cls(**values)

    @property
    def active(self) -> bool:
        return any((self.duplicate, self.fail_before, self.fail_after, self.throttle, self.server_error))

    def worker_environment(self) -> dict[str, str]:
        """What a function's worker needs to inject the per-request faults."""
        if not (self.throttle or self.server_error):
            return {}
        spec = f"throttle={self.throttle},server_error={self.server_error},seed={self.seed}"
        return {"HYBRIDSYNC_DYNAMODB_FAULTS": spec}


class Faults:
    """Wraps invocations with the plan's faults; `counts` says how many of each were injected."""

    def __init__(self, plan: FaultPlan):
        self.plan = plan
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(plan.seed)
        self._lock = threading.Lock()

    def _roll(self, kind: str) -> bool:
        with self._lock:
            hit = self._rng.random() < getattr(self.plan, kind)
            if hit:
                self.counts[kind] += 1
            return hit

    def wrap(self, name: str, invoke: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def faulty(event: dict[str, Any]) -> Any:
            if self._roll("fail_before"):
                raise FunctionError("Injected.FailBefore", f"injected: {name} failed before it ran")
            result = invoke(event)
            if self._roll("duplicate"):
                result = invoke(event)  # the same batch again; its answer is the one that counts
            if self._roll("fail_after"):
                raise FunctionError("Sandbox.Timedout", f"injected: {name} ran, then was reported timed out")
            return result

        return faulty
