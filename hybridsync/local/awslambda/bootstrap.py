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
import signal
import sys
import traceback

# Ctrl-C in the terminal reaches every process of its group: the app stops the container (it
# closes its stdin), as Lambda's control plane would, so no KeyboardInterrupt lands in the log.
signal.signal(signal.SIGINT, signal.SIG_IGN)
asset, handler_name, function_name, memory, answers_fd = sys.argv[1:6]
sys.path[0] = asset  # the asset's copy of everything, first
protocol = os.fdopen(int(answers_fd), "w", buffering=1)
sys.stdout = sys.stderr


def _local(name: str):  # a module of the local app (`iam/policies`, under local/), by its path
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


if any(os.environ.get(f"HYBRIDSYNC_{hook}") for hook in ("NETWORK", "IAM", "DYNAMODB_FAULTS")):
    import boto3

    boto3.setup_default_session()  # every client the function builds comes from this session
    if os.environ.get("HYBRIDSYNC_NETWORK"):  # see vpc/network.py: its VPC's routes, checked first
        _local("vpc/network").install(boto3.DEFAULT_SESSION.events, os.environ["HYBRIDSYNC_NETWORK"])
    if os.environ.get("HYBRIDSYNC_IAM"):  # see iam/policies.py: calls checked against the execution role
        _local("iam/policies").install(boto3.DEFAULT_SESSION.events, os.environ["HYBRIDSYNC_IAM"])
    if os.environ.get("HYBRIDSYNC_DYNAMODB_FAULTS"):  # see dynamodb/faults.py; each logged
        spec = os.environ["HYBRIDSYNC_DYNAMODB_FAULTS"]

        def injected(kind: str) -> None:
            print(f"injected: {kind}", file=sys.stderr, flush=True)

        _local("dynamodb/faults").inject(boto3.DEFAULT_SESSION.events, spec, injected)

Context = _local("awslambda/context").Context

try:
    module_name, _, attribute = handler_name.rpartition(".")
    handler = getattr(importlib.import_module(module_name), attribute)
    init_error = None
except Exception as error:  # reported on every invocation, as Lambda reports an init failure
    handler, init_error = None, error
    # and logged once, with its trace, as Lambda logs a failed init to the function's log group
    print(f"[ERROR] Runtime.ImportModuleError: Unable to import module '{module_name}': {error}",
          file=sys.stderr, flush=True)  # fmt: skip
    traceback.print_exception(error, file=sys.stderr)

for line in sys.stdin:
    request = json.loads(line)
    try:
        if init_error is not None:
            raise init_error
        context = Context(request["request_id"], request["deadline"], function_name, int(memory))
        result = handler(request["event"], context)
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
