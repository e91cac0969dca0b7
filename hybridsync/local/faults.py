"""Faults injected into the local app's stream deliveries, seeded so a run can be repeated: what
Lambda may do to a batch under at-least-once delivery, on purpose and often.

  duplicate     the batch is delivered again after it succeeded (a retried poll, a lost ack)
  fail_before   the invocation fails before the function runs (an init error, a throttle)
  fail_after    the function runs to the end, then the invocation is reported failed (a timeout
                after the work was done): the platform retries what was already applied

  throttle      a DynamoDB request of a function answered with a throttle (400) before it is sent
  server_error  ... with an InternalServerError (500)
  server_error_after  a DynamoDB write sent and applied, then answered with a 500: the SDK retries
                what DynamoDB already did (see dynamodb_faults.py)

  conflict      a transaction (TransactWriteItems) updating an item another invocation's transaction
                is writing at that moment, cancelled with TransactionConflict (dynamodb_faults.py)

  duplicate_put a table's change put into its Kinesis stream twice, the copy after the next
                change (a producer's retry: each copy has its own sequence number; Kinesis
                kds.html and "Handling duplicate records")
  reorder       a change held back and put after the next one (kds.html: records may appear out
                of order)

The first three are probabilities per invocation, the next three per DynamoDB request (injected in
the function's worker, `bootstrap.py`: the outbox drain's too), the last two per change of a
Kinesis-sourced table (local/kinesis/models.py, each table its own seeded rolls).
`./scripts/up --faults duplicate=0.2,throttle=0.05` runs the app with them; the mapping's own
retries, bisection and failure destination do the rest.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from hybridsync.local.awslambda.functions import FunctionError
from hybridsync.local.dynamodb import faults as dynamodb_faults

CONFLICT_DIR = Path(tempfile.gettempdir()) / f"hybridsync-claims-{os.getpid()}"


@dataclass(frozen=True)
class FaultPlan:
    seed: int = 7
    duplicate: float = 0.0
    fail_before: float = 0.0
    fail_after: float = 0.0
    throttle: float = 0.0
    server_error: float = 0.0
    server_error_after: float = 0.0
    conflict: float = 0.0
    duplicate_put: float = 0.0
    reorder: float = 0.0

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        """`duplicate=0.2,fail_after=0.05,seed=3` (any subset)."""
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, raw in dynamodb_faults.pairs(text).items():
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
        return any(getattr(self, f.name) for f in fields(self) if f.name != "seed")

    @property
    def dynamodb_spec(self) -> str:
        """The per-request faults, as `dynamodb_faults.inject` takes them ("" for none)."""
        chosen = [f"{kind}={getattr(self, kind)}" for kind in dynamodb_faults.KINDS if getattr(self, kind)]
        if self.conflict:  # processes see each other's transactions through a shared directory
            chosen += [f"conflict={self.conflict}", f"conflict_dir={CONFLICT_DIR}"]
        return ",".join([*chosen, f"seed={self.seed}"]) if chosen else ""

    def worker_environment(self) -> dict[str, str]:
        """What a function's worker needs to inject the per-request faults."""
        return {"HYBRIDSYNC_DYNAMODB_FAULTS": self.dynamodb_spec} if self.dynamodb_spec else {}


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

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    def pump_faults(self, table: str) -> Callable[[str], bool]:
        """A Kinesis destination's rolls (`duplicate_put`, `reorder`), its own for the table."""
        from hybridsync.local.kinesis.models import seeded

        rates = {kind: getattr(self.plan, kind) for kind in ("duplicate_put", "reorder")}
        return seeded(self.plan.seed, table, rates, self._count)

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


def injected(state_dir: Path, counts: dict[str, int]) -> dict[str, int]:
    """Every fault of a run: the app's own counts (`status()["faults_injected"]`) and those the
    function workers logged in `<state_dir>/logs`."""
    total = Counter(counts)
    for log in (state_dir / "logs").glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("injected: "):
                total[line.removeprefix("injected: ").strip()] += 1
    return dict(total)
