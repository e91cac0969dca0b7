"""Routes out of a VPC, enforced locally: a function attached to a VPC reaches only the services its
templates give it a route to (a gateway endpoint on its subnets, an interface endpoint whose security
group admits it, a NAT: `hybridsync.truth.routes.network`). A call to any other service fails as it does
in AWS, where the connection never opens and the SDK gives up with a connect timeout; here at once,
with the same exception (botocore's ConnectTimeoutError), saying which route is missing. So a code path
that only works with a route the stacks do not build fails on your machine too.

The check runs before every other hook of the session (IAM's included): a request that never reaches
the service is never authorized either. It raises before botocore's send loop, so no retry stretches
it into the minutes a real timeout takes (AWS SDKs retry connect timeouts: botocore's standard retry
mode treats them as transient). What the platform does with the function's role from outside the
VPC (its mapping's stream reads, its on-failure destination, its dead-letter queue, its logs and
traces) never goes through the function's clients, so nothing here touches it.

Self-contained (no hybridsync imports): a function's worker loads this file by its path, as it
loads `iam.py`.
"""

from __future__ import annotations

import json
from typing import Any

MISSING = "no gateway endpoint, no interface endpoint admitting its security group, no NAT"


def endpoint_url(model: Any, region: str) -> str:
    """The public endpoint a call to the service would connect to (`streams.dynamodb` for Streams)."""
    return f"https://{model.service_model.endpoint_prefix}.{region}.amazonaws.com"


def reason(spec: dict[str, Any], service: str) -> str:
    """Why `service` cannot be reached from the function in `spec`, in words an operator acts on."""
    why = spec.get("needed", {}).get(service)
    reached = ", ".join(sorted(spec.get("reachable", {}))) or "none"
    return (
        f"{spec['function']} cannot reach {service} from its VPC: {MISSING}"
        + (f" (it needs it for {why})" if why else "")
        + f"; it reaches {reached}"
    )


def unreachable_error() -> type:
    """botocore's ConnectTimeoutError, with the missing route in its message (same class name, so a
    function's error reads `ConnectTimeoutError` as in AWS)."""
    from botocore.exceptions import ConnectTimeoutError

    class Unreachable(ConnectTimeoutError):
        fmt = 'Connect timeout on endpoint URL: "{endpoint_url}" ({reason})'

    Unreachable.__name__ = Unreachable.__qualname__ = "ConnectTimeoutError"
    return Unreachable


def install(events: Any, spec: str) -> None:
    """Refuse every call of the clients a session makes to a service not in `spec`'s `reachable`
    (JSON: function, region, reachable: service -> how, or "*" -> how for a route to every
    service, needed: service -> why)."""
    network = json.loads(spec)
    reachable = set(network.get("reachable", {}))
    error = unreachable_error()

    def check(model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        if service not in reachable and "*" not in reachable:  # "*": routes to everything (a NAT)
            raise error(endpoint_url=endpoint_url(model, network.get("region", "us-east-1")),
                        reason=reason(network, service))  # fmt: skip

    # first of the generic handlers: before IAM's check, which bootstrap.py installs after this one
    events.register_first("before-parameter-build", check)
