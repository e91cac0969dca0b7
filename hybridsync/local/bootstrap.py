"""A local Lambda "container": runs one function's handler from its synthesized asset folder.

Started as a script (`python bootstrap.py <asset dir> <module.function> <name> <memory MB> <fd>`), so the
function imports the library copy its asset ships, not the repository's. It reads one invocation per
line on stdin (`{"event": ..., "deadline": <epoch s>, "request_id": ...}`) and answers one line on
the protocol pipe (file descriptor <fd>): `{"result": ...}` or `{"error": {"errorType",
"errorMessage", "stackTrace"}}`.
The handler's own output (logs, metrics) goes to stderr.
"""

import importlib
import json
import os
import sys
import time
import traceback

asset, handler_name, function_name, memory, answers_fd = sys.argv[1:6]
sys.path[0] = asset  # the asset's copy of everything, first
protocol = os.fdopen(int(answers_fd), "w", buffering=1)
sys.stdout = sys.stderr


class Context:
    def __init__(self, request_id: str, deadline: float) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        region = os.environ.get("AWS_REGION", "us-east-1")
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{function_name}"
        self.memory_limit_in_mb = int(memory)
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def inject_dynamodb_faults(spec: str) -> None:
    """`throttle=0.05,server_error=0.02,seed=7`: that share of the function's DynamoDB requests is
    answered, before it is sent, with a throttle (400) or an InternalServerError (500), as DynamoDB
    answers under load; the SDK's retries must absorb them. Each is logged as `injected: <code>`."""
    import random

    import boto3
    from botocore.awsrequest import AWSResponse

    plan = dict(part.split("=", 1) for part in spec.split(",") if part)
    rng = random.Random(int(plan.get("seed", 7)))
    throttle, server_error = float(plan.get("throttle", 0)), float(plan.get("server_error", 0))

    class Body:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def stream(self, **_: object) -> object:
            yield self.data

    def before_send(request: object, **_: object) -> object:
        roll = rng.random()
        if roll < throttle:
            code, status = "ProvisionedThroughputExceededException", 400
        elif roll < throttle + server_error:
            code, status = "InternalServerError", 500
        else:
            return None
        print(f"injected: {code}", file=sys.stderr, flush=True)
        body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"})
        headers = {"x-amzn-RequestId": "injected", "Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, Body(body.encode()))  # type: ignore[attr-defined]

    boto3.setup_default_session()
    boto3.DEFAULT_SESSION.events.register("before-send.dynamodb", before_send)


if os.environ.get("HYBRIDSYNC_DYNAMODB_FAULTS"):
    inject_dynamodb_faults(os.environ["HYBRIDSYNC_DYNAMODB_FAULTS"])

try:
    module_name, _, attribute = handler_name.rpartition(".")
    handler = getattr(importlib.import_module(module_name), attribute)
    init_error = None
except Exception as error:  # reported on every invocation, as Lambda reports an init failure
    handler, init_error = None, error

for line in sys.stdin:
    request = json.loads(line)
    try:
        if init_error is not None:
            raise init_error
        result = handler(request["event"], Context(request["request_id"], request["deadline"]))
        answer = {"result": result}
    except Exception as error:
        answer = {
            "error": {
                "errorType": type(error).__name__,
                "errorMessage": str(error),
                "stackTrace": traceback.format_exception(error),
            }
        }
    protocol.write(json.dumps(answer, default=str) + "\n")
