"""Load a function's handler module the way Lambda does, and a Lambda context to call it with."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> ModuleType:
    """`lambdas/<name>/handler.py` as its own module (every function's module is named handler)."""
    spec = importlib.util.spec_from_file_location(
        f"lambdas_{name}_handler", ROOT / "lambdas" / name / "handler.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class LambdaContext:
    function_name: str = "local"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "local-request"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000
