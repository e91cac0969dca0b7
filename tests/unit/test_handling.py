"""The one decorator of the nine handlers (`hybridsync.runtime.handling.lambda_handler`): its order,
with stand-ins that record what runs when, then with Powertools itself (the probe leaves no metric
or log line; the metrics are flushed after the handler, a failed one included; the log lines carry
the invocation's context); and every handler wearing it, and nothing else."""

from __future__ import annotations

import ast
import json
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hybridsync.local.awslambda.context import Context
from hybridsync.runtime import handling
from tests.handlers import cold_start

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.stem for p in (ROOT / "hybridsync" / "functions").glob("*.py") if p.stem != "__init__")
PROBE = {"hybridsync": "doctor", "services": []}  # asks nothing: answered without a network


class Recorder:
    """Powertools' three decorators as stand-ins, each writing down when it is entered and left."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _wrapping(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(handler: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(event: Any, context: Any) -> Any:
                self.seen.append(f"{name} in")
                try:
                    return handler(event, context)
                finally:
                    self.seen.append(f"{name} out")

            return wrapped

        return decorate

    def __getattr__(self, name: str) -> Any:
        decorators = {"log_metrics": "metrics", "capture_lambda_handler": "trace",
                      "inject_lambda_context": "log"}  # fmt: skip
        if name in decorators:
            return self._wrapping(decorators[name])
        raise AttributeError(name)


def decorated(recorder: Recorder, metrics: bool = True) -> Callable[[Any, Any], Any]:
    def handler(event: Any, context: Any) -> str:
        recorder.seen.append("handler")
        if event.get("fail"):
            raise RuntimeError("the handler failed")
        return "handled"

    return handling.lambda_handler(recorder, recorder, recorder if metrics else None)(handler)  # type: ignore[arg-type]


@pytest.mark.parametrize("metrics", [True, False])
def test_the_order_the_probe_then_metrics_then_trace_then_log_context(metrics: bool):
    recorder = Recorder()
    handler = decorated(recorder, metrics)
    assert handler({"Records": []}, None) == "handled"
    layers = ["metrics", "trace", "log"] if metrics else ["trace", "log"]
    assert recorder.seen == [*(f"{n} in" for n in layers), "handler", *(f"{n} out" for n in reversed(layers))]
    recorder.seen.clear()
    with pytest.raises(RuntimeError):
        handler({"fail": True}, None)  # every layer is left, the metrics' last: they are flushed
    assert recorder.seen[-1] == ("metrics out" if metrics else "trace out")


def test_the_probe_is_answered_before_anything_else():
    recorder = Recorder()
    answer = decorated(recorder)(PROBE, None)
    assert answer["services"] == {} and recorder.seen == []


@pytest.fixture
def metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[Metrics]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    metrics = Metrics(namespace="hybridsync-test", service="handling")
    metrics.clear_metrics()  # Powertools' metrics are one set per process
    yield metrics
    metrics.clear_metrics()


def fresh_logger() -> Logger:
    """A Powertools Logger writing to the stdout of now (capsys's): a logger's handler keeps the
    stream it was first given, so each test has a logger of its own name."""
    return Logger(service=f"handling-{uuid.uuid4().hex}")


def emitted(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# The Tracer is a stand-in below: the X-Ray SDK's recorder opens a UDP socket, which this tier
# refuses; its place in the order is proved above.


def test_with_powertools_the_probe_leaves_no_metric_log_line_nor_log_context(metrics, capsys):
    logger = fresh_logger()

    @handling.lambda_handler(logger, Recorder(), metrics)  # type: ignore[arg-type]
    def handler(event: Any, context: Any) -> None:
        pytest.fail("the handler ran for the doctor's probe")

    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log_metrics warns of a flush with no metric in it
        assert handler(PROBE, Context(request_id="probe-1"))["services"] == {}
    assert emitted(capsys.readouterr().out) == []
    assert "function_request_id" not in logger.get_current_keys()


@pytest.mark.parametrize("fail", [False, True])
def test_with_powertools_the_metrics_are_flushed_after_the_handler_and_its_log_has_the_context(
    metrics, capsys, fail: bool
):
    logger = fresh_logger()

    @handling.lambda_handler(logger, Recorder(), metrics)  # type: ignore[arg-type]
    def handler(event: Any, context: Any) -> str:
        metrics.add_metric("Handled", MetricUnit.Count, 1)
        logger.info("handling")
        if fail:
            raise RuntimeError("the handler failed")
        return "handled"

    capsys.readouterr()
    if fail:
        with pytest.raises(RuntimeError):
            handler({"Records": []}, Context(request_id="req-1"))
    else:
        assert handler({"Records": []}, Context(request_id="req-1")) == "handled"
    log, flush = emitted(capsys.readouterr().out)
    assert log["message"] == "handling" and log["function_request_id"] == "req-1"
    assert flush["Handled"] == [1.0] and "_aws" in flush  # the metric, flushed after the handler


def test_every_handler_wears_the_one_decorator_and_no_other():
    """`handling.lambda_handler` answers the doctor's probe before anything else (above): no
    metrics, trace or log of it. A decorator stacked outside it would run for the probe too."""
    assert len(FUNCTIONS) == 9
    for name in FUNCTIONS:
        tree = ast.parse((ROOT / "hybridsync" / "functions" / f"{name}.py").read_text())
        (handler,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "handler"]
        (decorator,) = handler.decorator_list
        assert isinstance(decorator, ast.Call), name
        assert ast.unparse(decorator.func) == "handling.lambda_handler", name


def test_no_handler_imports_the_doctors_probe_at_cold_start():
    """The probe's module (and its thread pool) is imported when a probe arrives, not before."""
    printed = cold_start(
        "import importlib\n"
        f"for name in {FUNCTIONS!r}: importlib.import_module(f'hybridsync.functions.{{name}}')\n"
        "print('hybridsync.runtime.doctor' in sys.modules)"
    )
    assert printed.strip() == "False"
