"""The context object Lambda passes a handler, for the local app's function workers and for tests
that call a handler directly. Imports nothing of hybridsync: a worker loads it by its path, beside
the asset's copy of the engine (which does not ship the local app)."""

from __future__ import annotations

import os
import time


class Context:
    """What Powertools and the handlers read of Lambda's context: names, memory, the request id
    and the time left before `deadline` (epoch seconds)."""

    def __init__(self, request_id: str = "local-request", deadline: float | None = None,
                 function_name: str = "local", memory_mb: int = 512) -> None:  # fmt: skip
        region = os.environ.get("AWS_REGION", "us-east-1")
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{function_name}"
        self.memory_limit_in_mb = int(memory_mb)
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = deadline if deadline is not None else time.time() + 60

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))
