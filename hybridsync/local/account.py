"""The account the local app runs in: what every emulated service's `provision(account, assembly)`
shares, given explicitly instead of through one class's `self` -- the ids (region, account, prefix),
the endpoints and their clients, the state folder, the clock's stop, the worker threads and log
files, the metrics CloudWatch would hold, the saved positions, and the names every resource gets
before anything is created (so references resolve). A service that another one calls is set here
once provisioned (`logins`, `roles`, `functions`, `lambda_api`): the services import this module,
never each other's provisioning, so no circle of imports closes."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hybridsync.local.awslambda.mappings import Checkpoints
from hybridsync.local.cloudwatch.alarms import Metrics
from hybridsync.local.dynamodb.ttl import Expiries
from hybridsync.local.faults import Faults
from hybridsync.local.template import ACCOUNT, Assembly, Resource
from hybridsync.runtime import aws

if TYPE_CHECKING:
    from hybridsync.local.awslambda.functions import LocalFunction
    from hybridsync.local.awslambda.responses import LambdaApi
    from hybridsync.local.iam.roles import Roles
    from hybridsync.local.postgres.logins import Logins

TABLE_TYPES = ("AWS::DynamoDB::GlobalTable", "AWS::DynamoDB::Table")


@dataclass
class Account:
    """One local account and region, as the app's services see it."""

    assembly: Assembly
    state_dir: Path
    prefix: str
    region: str
    dynamodb_endpoint: str
    services_endpoint: str  # S3, SQS, Secrets Manager, Kinesis (moto server)
    database_url: str
    faults: Faults | None = None  # on stream deliveries
    iam: bool = True  # each function's calls checked against its role (local/iam/policies.py)
    retention_s: float | None = None  # a stream's records' lifetime (None: DynamoDB's 24 h)
    id: str = ACCOUNT
    metrics: Metrics = field(default_factory=Metrics)  # what CloudWatch would hold (cloudwatch/alarms.py)
    stopping: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    logs: list[IO[str]] = field(default_factory=list)
    # names, before anything is created (names.py)
    tables: dict[str, str] = field(default_factory=dict)  # construct -> physical name
    table_names: dict[str, str] = field(default_factory=dict)  # the model's name -> physical name
    buckets: dict[str, str] = field(default_factory=dict)  # construct -> physical name
    queues: dict[str, str] = field(default_factory=dict)  # queue name -> URL
    # the services another service calls, once provisioned
    logins: Logins | None = None
    roles: Roles | None = None
    functions: dict[str, LocalFunction] = field(default_factory=dict)
    lambda_api: LambdaApi | None = None

    def __post_init__(self) -> None:
        # TTL for every expired item, whatever DynamoDB Local does (dynamodb/ttl.py)
        self.expiries = Expiries(self.state_dir / "ttl-deletions.jsonl", keep_s=self.retention_s or 24 * 3600)
        # the saved stream positions, one for the file: pumps and mappings
        self.checkpoints = Checkpoints(self.state_dir / "positions.json")

    def client(self, service: str) -> Any:
        """A client of a local service: DynamoDB (and its streams) on DynamoDB Local, the rest on moto."""
        dynamodb = service in ("dynamodb", "dynamodbstreams")
        return aws.client(
            service, self.dynamodb_endpoint if dynamodb else self.services_endpoint, self.region
        )

    def spawn(self, target: Any, *args: Any, name: str) -> None:
        """A worker thread of the app, joined when it stops."""
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def open_log(self, name: str, buffering: int = -1) -> IO[str]:
        """A log file under the state folder's `logs/`, appended to, closed when the app stops."""
        logs = self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_file = (logs / name).open("a", buffering=buffering)
        self.logs.append(log_file)
        return log_file

    def python_functions(self) -> list[Resource]:
        """The app's own functions: Python handlers shipped as assets (not CDK's framework ones)."""
        return [
            f
            for f in self.assembly.resources("AWS::Lambda::Function")
            if str(f.properties.get("Runtime", "")).startswith("python") and "aws:asset:path" in f.metadata
        ]

    def table_resources(self) -> list[Resource]:
        return [t for kind in TABLE_TYPES for t in self.assembly.resources(kind)]
