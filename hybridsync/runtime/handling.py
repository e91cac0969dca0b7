"""The one decorator every Lambda handler of `hybridsync.functions` wears (`lambda_handler`): the
doctor's probe, then Powertools' metrics, trace and log context, in the one order that works.

From the outside in:

1. the doctor's probe (`hybridsync doctor`) is answered before anything else: no metrics flushed,
   no trace segment, no log context, none of the handler's own code. Its module
   (`hybridsync.runtime.doctor`, with its thread pool) is imported when a probe arrives, so a
   cold start never pays for it;
2. `metrics.log_metrics`: the metrics are flushed after everything inside has ended, a failure
   included (a failed drain still emits its outbox's depth and age, which an alarm watches);
3. `tracer.capture_lambda_handler`: one segment per invocation, the handler's error recorded in it;
4. `logger.inject_lambda_context`: every log line of the handler carries the invocation's context
   (request id, function, cold start).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics, Tracer

Handler = Callable[[Any, Any], Any]

# The probe's event names itself: {"hybridsync": "doctor", ...} (hybridsync.runtime.doctor).
EVENT_KEY, EVENT_VALUE = "hybridsync", "doctor"


def is_probe(event: Any) -> bool:
    return isinstance(event, dict) and event.get(EVENT_KEY) == EVENT_VALUE


def answers_the_doctor(handler: Handler) -> Handler:
    """The handler, answering the doctor's probe first (nothing of the handler runs for it)."""

    @functools.wraps(handler)
    def answering(event: Any, context: Any) -> Any:
        if is_probe(event):
            from hybridsync.runtime import doctor  # only `hybridsync doctor` sends one: rare

            return doctor.probe(event)
        return handler(event, context)

    return answering


def lambda_handler(
    logger: Logger, tracer: Tracer, metrics: Metrics | None = None
) -> Callable[[Handler], Handler]:
    """A function's handler with the doctor's probe, its metrics (when it emits any), its trace and
    its log context, in the order of this module's docstring."""

    def decorate(handler: Handler) -> Handler:
        wrapped = tracer.capture_lambda_handler(logger.inject_lambda_context(handler))
        if metrics is not None:
            wrapped = metrics.log_metrics(wrapped)
        return answers_the_doctor(wrapped)

    return decorate
